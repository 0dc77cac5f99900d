package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/internal/testfiles"

	"github.com/ssfusion/ssfusion/experiments"
)

func TestChoose(t *testing.T) {
	all := steps()
	got, err := choose(all, "exdyna,headline")
	if err != nil || len(got) != 2 || got[0].name != "exdyna" || got[1].name != "headline" {
		t.Fatalf("choose: %v, %v", got, err)
	}
	if _, err := choose(all, "headline,nope"); err == nil || !strings.Contains(err.Error(), `no step called "nope"`) {
		t.Errorf("an unknown step: %v", err)
	}
	seen := map[string]bool{}
	for _, s := range all {
		if seen[s.name] {
			t.Errorf("two steps called %s", s.name)
		}
		seen[s.name] = true
		if s.est <= 0 || len(s.args) == 0 {
			t.Errorf("step %s has no estimate or no command", s.name)
		}
	}
}

// TestRemaining: a step finished at this revision costs nothing more; one finished at
// another revision costs what it took then; one never run, its estimate.
func TestRemaining(t *testing.T) {
	a := step{name: "a", args: []string{"run"}, est: time.Hour}
	b := step{name: "b", args: []string{"run"}, est: time.Hour}
	c := step{name: "c", args: []string{"run"}, est: time.Hour}
	st := &state{Steps: map[string]*stepState{
		"a": {Revision: "r2", Finished: time.Now(), Seconds: 600},
		"b": {Revision: "r1", Finished: time.Now(), Seconds: 1200},
	}}
	if got, want := remaining([]step{a, b, c}, st, "r2"), 20*time.Minute+time.Hour; got != want {
		t.Errorf("remaining %v, want %v", got, want)
	}
	if got, want := total([]step{a, b, c}, st), 10*time.Minute+20*time.Minute+time.Hour; got != want {
		t.Errorf("total %v, want %v", got, want)
	}
	if !done(st, a, "r2") || done(st, b, "r2") || done(st, c, "r2") {
		t.Error("only a is done at r2")
	}
}

// TestMoveAside: another revision's folder is moved under results/.previous, not deleted,
// and its hand-written analysis stays where it was.
func TestMoveAside(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.MkdirAll(filepath.Join("results", "exdyna", "cell"), 0o755); err != nil {
		t.Fatal(err)
	}
	analysis := filepath.Join("results", "exdyna", experiments.AnalysisFile)
	if err := os.WriteFile(analysis, []byte("# reading\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := step{name: "exdyna", out: "exdyna"}
	if err := moveAside(s, &stepState{Revision: "0123456789abcdef"}); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filepath.Join("results", "exdyna")); len(left) != 1 || left[0].Name() != experiments.AnalysisFile {
		t.Errorf("the folder holds %v, want the analysis alone", left)
	}
	moved, _ := filepath.Glob(filepath.Join("results", ".previous", "exdyna-0123456789ab-*", "cell"))
	if len(moved) != 1 {
		t.Errorf("moved folders %v, want one under results/.previous", moved)
	}
	if err := moveAside(s, nil); err != nil {
		t.Errorf("no folder to move: %v", err)
	}
}

// TestLinkInto: the revision's checkout's folder becomes a link to the checkout's, whatever it held,
// and linking again changes nothing.
func TestLinkInto(t *testing.T) {
	t.Chdir(t.TempDir())
	tree := "tree"
	if err := os.MkdirAll(filepath.Join(tree, "results", "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := linkInto(tree, "results"); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(tree, "results", "new.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("results", "new.txt")); err != nil {
		t.Errorf("a file written through the revision's checkout's results/ is not in the checkout's: %v", err)
	}
	if _, err := os.Stat(filepath.Join(tree, "results", "old")); !os.IsNotExist(err) {
		t.Errorf("the revision's checkout's own results are still there: %v", err)
	}
}

// TestPrepareStampsTheRevision: the program built for a revision, in a checkout nested in
// a repository with uncommitted changes (as bin/ is in this one), is stamped with that
// revision and an unmodified tree, and a second call reuses it.
func TestPrepareStampsTheRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	t.Chdir(t.TempDir())
	t.Setenv("GOFLAGS", "")
	files := map[string]string{
		"go.mod":     "module example.com/tiny\n\ngo 1.22\n",
		"main.go":    "package main\n\nfunc main() {}\n",
		".gitignore": "bin/\n",
		"results/a":  "committed\n",
	}
	testfiles.Write(t, ".", files)
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "--quiet")
	git("add", ".")
	git("commit", "--quiet", "-m", "tiny")
	rev := git("rev-parse", "HEAD")
	// What the enclosing checkout holds meanwhile must not reach the stamp.
	if err := os.WriteFile(filepath.Join("results", "a"), []byte("rewritten\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tree, bin, err := prepare(rev)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyStamp(bin, rev); err != nil {
		t.Error(err)
	}
	if dest, err := os.Readlink(filepath.Join(tree, "results")); err != nil || !strings.HasSuffix(dest, "results") {
		t.Errorf("the checkout's results/ is %q (%v), want a link to this one's", dest, err)
	}
	if _, _, err := prepare(rev); err != nil {
		t.Errorf("preparing again: %v", err)
	}
	// A binary left by a build that stamped something else is refused, not reused.
	if err := os.WriteFile(bin, []byte("not a program"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := prepare(rev); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("preparing over a foreign binary: %v, want a refusal", err)
	}
}

// TestMissesReported: a validation that exits with status 1 after writing its report has
// finished (its misses are in the report); one that exits so without a fresh report, exits
// otherwise, or is not a step that reports misses, has failed.
func TestMissesReported(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	tree := filepath.Join(dir, "tree")
	script := filepath.Join(tree, "tools", "validate.sh")
	if err := os.MkdirAll(filepath.Dir(script), 0o755); err != nil {
		t.Fatal(err)
	}
	body := "#!/bin/sh\nmkdir -p results/v\n[ \"$1\" = write ] && echo '# report' > results/v/report.md\nexit $2\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := linkInto(tree, "results"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name          string
		reportsMisses bool
		args          []string
		finished      bool
	}{
		{"misses, report written", true, []string{"write", "1"}, true},
		{"clean", true, []string{"write", "0"}, true},
		{"status 1 with no fresh report", true, []string{"none", "1"}, false},
		{"another status", true, []string{"write", "2"}, false},
		{"a step that does not report misses", false, []string{"write", "1"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A report an earlier run left behind must not pass for this run's.
			if err := os.MkdirAll(filepath.Join("results", "v"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join("results", "v", "report.md"), []byte("# old\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			s := step{name: "v", out: "v", args: append([]string{"tools/validate.sh"}, c.args...), est: time.Minute, reportsMisses: c.reportsMisses}
			st := &state{Steps: map[string]*stepState{"v": {Revision: "r1"}}} // a rerun: nothing is moved aside
			err := runStep(t.Context(), s, tree, "", "r1", st)
			if got := err == nil && done(st, s, "r1"); got != c.finished {
				t.Errorf("finished %v (err %v), want %v", got, err, c.finished)
			}
		})
	}
}
