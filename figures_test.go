package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/internal/testfiles"
)

// TestFiguresCommandGoesOnPastABrokenFile: a file whose source is missing is reported and
// left alone, and the command fails, but the other files are still rewritten.
func TestFiguresCommandGoesOnPastABrokenFile(t *testing.T) {
	t.Chdir(t.TempDir())
	files := map[string]string{
		"results/exp/summary.json": `{"accuracy": 0.981}`,
		"stale.md":                 "<!-- fig %.1f: 100 * json(\"results/exp/summary.json\", \"accuracy\") -->97.0<!-- /fig -->%\n",
		"broken.md":                "<!-- fig %.1f: json(\"results/gone/summary.json\", \"accuracy\") -->1.0<!-- /fig -->\n",
	}
	testfiles.Write(t, ".", files)
	cmd := newFiguresCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"broken.md", "stale.md"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "broken.md") || !strings.Contains(err.Error(), "results/gone/summary.json") {
		t.Errorf("error %v, want one naming broken.md and its missing source", err)
	}
	if raw, _ := os.ReadFile("stale.md"); !strings.Contains(string(raw), "-->98.1<!--") {
		t.Errorf("stale.md was not rewritten: %s", raw)
	}
	if raw, _ := os.ReadFile("broken.md"); string(raw) != files["broken.md"] {
		t.Errorf("broken.md changed: %s", raw)
	}
	if !strings.Contains(out.String(), "left as they were: broken.md") {
		t.Errorf("output %q does not say a file was left alone", out.String())
	}
}
