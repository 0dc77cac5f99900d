package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestCampaign runs a small campaign, one trial of every kind of fault, against this
// module's ssfusion, and fails if any trial violates an invariant. The trainings wait
// longer on a silent peer than the full campaign's, since go test runs other packages'
// tests beside them.
func TestCampaign(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the campaign finds workers and shared memory through /proc and /dev/shm")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := build(root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	err = runCampaign(context.Background(), options{trials: len(allKinds), seed: 7, only: -1, kinds: allKinds, bin: bin, timeout: 8 * time.Second}, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
}

// TestDrawIsReproducible: the same seed and number draw the same trial, and every kind
// comes up in a campaign as long as the list of kinds.
func TestDrawIsReproducible(t *testing.T) {
	j := defaultJob("ssfusion")
	seen := map[string]bool{}
	for id := range len(allKinds) {
		a, b := draw(3, id, allKinds, j), draw(3, id, allKinds, j)
		if a != b {
			t.Errorf("trial %d drawn twice: %+v and %+v", id, a, b)
		}
		seen[a.kind] = true
		if a.rank < 0 || a.rank >= a.setup.workers || a.step < 1 || a.step >= j.steps {
			t.Errorf("trial %d: rank %d of %d, step %d of %d", id, a.rank, a.setup.workers, a.step, j.steps)
		}
	}
	if len(seen) != len(allKinds) {
		t.Errorf("kinds drawn %v, want all of %v", seen, allKinds)
	}
}

// TestHalfWrittenFindsBrokenFiles: the check that no result is half-written catches a
// truncated JSON or CSV file and ignores temporary files.
func TestHalfWrittenFindsBrokenFiles(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"summary.json":            `{"complete": tr`,
		"metrics.csv":             "step,loss\n1,\"2.3\n",
		"checkpoint/latest.json":  `{"step": 10}`,
		".summary.json.tmp123":    `{"half`,
		"checkpoint/weights.data": "anything",
	}
	for name, body := range files {
		path := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := halfWritten(dir)
	want := []string{filepath.Join(dir, "metrics.csv"), filepath.Join(dir, "summary.json")}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("half-written %q, want %q", got, want)
	}
	if tmp := temporaryFiles(dir); len(tmp) != 1 {
		t.Errorf("temporary files %q, want one", tmp)
	}
}
