package main

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/internal/testfiles"
)

// TestCampaign runs a small campaign, one trial of every kind of fault, against this
// module's ssfusion, and fails if any trial violates an invariant. The trainings wait
// longer on a silent peer than the full campaign's, since go test runs other packages'
// tests beside them.
func TestCampaign(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the campaign finds workers and shared memory through /proc and /dev/shm")
	}
	bin := testBinary(t)
	var out strings.Builder
	err := runCampaign(context.Background(), options{trials: len(allKinds), seed: 7, only: -1, kinds: allKinds, bin: bin, timeout: 8 * time.Second}, &out)
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
	testfiles.Write(t, dir, files)
	got := halfWritten(dir)
	want := []string{filepath.Join(dir, "metrics.csv"), filepath.Join(dir, "summary.json")}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("half-written %q, want %q", got, want)
	}
	if tmp := temporaryFiles(dir); len(tmp) != 1 {
		t.Errorf("temporary files %q, want one", tmp)
	}
}

// TestReplays replays trials of the kinds that found defects: a job of two nodes cut
// apart and resumed (which started the checkpoint's whole world on each node), and a
// rank whose connections reset mid-frame (which hung until the launcher killed it).
func TestReplays(t *testing.T) {
	if testing.Short() || runtime.GOOS != "linux" {
		t.Skip("runs trainings in child processes, on Linux")
	}
	bin := testBinary(t)
	j := defaultJob(bin)
	j.timeout = 8 * time.Second
	c := &campaign{job: j, dir: t.TempDir(), reference: map[setup]string{}}
	for _, tr := range []trial{
		{id: 1, kind: kindPartition, setup: setup{"tcp", 4}, step: 25},
		{id: 2, kind: kindReset, setup: setup{"tcp", 4}, rank: 1, fault: "point=partial-frame hit=30 rank=1 action=error"},
	} {
		o := c.run(context.Background(), tr)
		if o.verdict == violated {
			t.Errorf("%s: %s", tr.kind, strings.Join(o.problems, "; "))
		}
		if strings.HasPrefix(o.note, "skipped") {
			t.Logf("%s: %s", tr.kind, o.note)
		}
		if tr.kind == kindReset && o.detect > j.timeout {
			t.Errorf("a reset rank ended the job in %v, more than the timeout", o.detect)
		}
	}
}

// testBinary builds this module's ssfusion command for the test.
func testBinary(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := build(root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
