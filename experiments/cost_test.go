package experiments

import (
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/trainer"
)

var updateCosts = flag.Bool("update-costs", false, "rewrite the cost line of every experiment file from the committed results")

func TestDurationWords(t *testing.T) {
	for _, c := range []struct {
		s    float64
		want string
	}{
		{0, "under a minute"}, {59.9, "under a minute"}, {60, "1 minute"}, {89, "1 minute"},
		{91, "2 minutes"}, {176.4, "3 minutes"}, {2090.7, "35 minutes"}, {7139, "119 minutes"},
		{7200, "2.0 hours"}, {3 * 3600 * 1.234, "3.7 hours"},
	} {
		if got := durationWords(c.s); got != c.want {
			t.Errorf("durationWords(%g) = %q, want %q", c.s, got, c.want)
		}
	}
}

func TestMeasuredCost(t *testing.T) {
	dir := t.TempDir()
	for i, wall := range []float64{30, 45.5, 100} {
		cell := filepath.Join(dir, "cell-"+string(rune('a'+i)))
		body, err := json.Marshal(trainer.Summary{WallSeconds: wall, Complete: true})
		if err != nil {
			t.Fatal(err)
		}
		writeSummary(t, cell, body)
	}
	// Files beside the cells and folders without a summary are not cells.
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte("# x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "plots"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := MeasuredCost(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Cells != 3 || c.Seconds != 175.5 {
		t.Errorf("MeasuredCost = %+v, want 3 cells and 175.5 s", c)
	}
	if got, want := c.String(), "3 cells, 3 minutes of training in all"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if _, err := MeasuredCost(filepath.Join(dir, "plots")); err == nil || !strings.Contains(err.Error(), "no cell") {
		t.Errorf("a folder without cells: %v, want an error saying so", err)
	}
	writeSummary(t, filepath.Join(dir, "cell-bad"), []byte("{not json"))
	if _, err := MeasuredCost(dir); err == nil || !strings.Contains(err.Error(), "cell-bad") {
		t.Errorf("a damaged summary: %v, want an error naming its cell", err)
	}
}

// costLine is the line of an experiment file that states its cost.
var costLine = regexp.MustCompile(`(?m)^# Cost[ ,:].*$`)

// wantCostLine is the cost line an experiment file must carry: generated from its committed
// results, or saying that none are committed.
func wantCostLine(t *testing.T, name string) string {
	t.Helper()
	dir := resultsDirOf(t, filepath.Join("..", "results"), name)
	if dir == "" {
		return "# Cost: not measured here; no results of it are committed."
	}
	c, err := MeasuredCost(dir)
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel("..", dir)
	return "# Cost, measured on the 2-core development machine: " + c.String() + " (" + filepath.ToSlash(rel) + ")."
}

// resultsDirOf is where the committed results of the experiment named name are kept under
// root: root/name, or for the simulator's validation runs root/name/name (simulate
// --validate-only --out root/name) or root/simulate/name; "" when git
// tracks no cell of either (the quickstart's folder, say, is the user's and not committed).
func resultsDirOf(t *testing.T, root, name string) string {
	t.Helper()
	for _, d := range []string{filepath.Join(root, name, name), filepath.Join(root, name), filepath.Join(root, "simulate", name)} {
		out, err := exec.Command("git", "ls-files", "--", filepath.ToSlash(d)).Output()
		if err != nil {
			t.Skipf("the committed results are what git tracks, and git ls-files failed: %v", err)
		}
		for _, f := range strings.Split(string(out), "\n") {
			if strings.HasSuffix(f, "/summary.json") {
				return d
			}
		}
	}
	return ""
}

// Every experiment file states what it costs, in one line generated from its committed results
// (go test ./experiments -run TestExperimentFilesStateTheirCost -update-costs rewrites them).
func TestExperimentFilesStateTheirCost(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no experiment files: %v", err)
	}
	for _, f := range files {
		spec, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want := wantCostLine(t, spec.Name)
		got := costLine.FindAllString(string(b), -1)
		if *updateCosts {
			text := string(b)
			if len(got) == 0 {
				text = insertBeforeName(text, want)
			} else {
				text = strings.Replace(costLine.ReplaceAllString(text, "\x00"), "\x00", want, 1)
				text = strings.ReplaceAll(text, "\x00\n", "")
			}
			if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s: cost lines %q, want the one line\n%s\n(-update-costs rewrites it)", f, got, want)
		}
	}
}

// insertBeforeName puts line at the end of the comment block that opens an experiment file.
func insertBeforeName(text, line string) string {
	i := strings.Index(text, "\nname:")
	if i < 0 {
		return line + "\n" + text
	}
	return text[:i+1] + line + "\n" + text[i+1:]
}
