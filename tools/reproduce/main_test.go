package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// TestMoveAside: another revision's folder is moved under results/.previous, not deleted.
func TestMoveAside(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.MkdirAll(filepath.Join("results", "exdyna", "cell"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := step{name: "exdyna", out: "exdyna"}
	if err := moveAside(s, &stepState{Revision: "0123456789abcdef"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("results", "exdyna")); !os.IsNotExist(err) {
		t.Errorf("the old folder is still there: %v", err)
	}
	moved, _ := filepath.Glob(filepath.Join("results", ".previous", "exdyna-0123456789ab-*", "cell"))
	if len(moved) != 1 {
		t.Errorf("moved folders %v, want one under results/.previous", moved)
	}
	if err := moveAside(s, nil); err != nil {
		t.Errorf("no folder to move: %v", err)
	}
}

// TestLinkInto: the worktree's folder becomes a link to the checkout's, whatever it held,
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
		t.Errorf("a file written through the worktree's results/ is not in the checkout's: %v", err)
	}
	if _, err := os.Stat(filepath.Join(tree, "results", "old")); !os.IsNotExist(err) {
		t.Errorf("the worktree's own results are still there: %v", err)
	}
}
