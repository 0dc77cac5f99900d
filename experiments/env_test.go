package experiments

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestEnvOverrides: SSF_* variables override every cell, as they override train's flags,
// and the report names them; a variable that names no key, or a key the runner owns, is
// an error.
func TestEnvOverrides(t *testing.T) {
	environ := []string{"HOME=/root", "SSF_LR=0.5", "SSF_MAX_STEPS=40", "PATH=/bin",
		// As train reads them: not a key, not its spelling, or empty, these set nothing.
		"SSF_CONFIG=x.yaml", "SSF_lr=9", "SSF_SEED=", "SSF_NO_SUCH_KEY=1"}
	env := EnvOverrides(environ)
	if len(env) != 2 || env["lr"] != "0.5" || env["max-steps"] != "40" {
		t.Fatalf("overrides %v", env)
	}
	if got := WithoutOverrides(environ); !slices.Equal(got, []string{"HOME=/root", "PATH=/bin"}) {
		t.Errorf("environment without overrides: %v", got)
	}
	s, err := Parse([]byte("name: e\nbase: {model: mlp, max-steps: 20, lr: 0.1}\nmatrix: {pipeline: [dense, pertensor]}"))
	if err != nil {
		t.Fatal(err)
	}
	s.Env = env
	cells, err := s.Expand(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cells {
		if c.Config.LR != 0.5 || c.Config.MaxSteps != 40 {
			t.Errorf("cell %s: lr %g, max-steps %d; want the environment's 0.5 and 40", c.Name, c.Config.LR, c.Config.MaxSteps)
		}
	}
	md, err := Report(s, cells)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md, "Environment overrides applied to every cell: SSF_LR=0.5, SSF_MAX_STEPS=40.") {
		t.Errorf("the report does not name the overrides:\n%s", md)
	}
	// The overrides kept beside the results read back with them, so the cells are not stale.
	dir := t.TempDir()
	s.Env = env
	cells, err = s.Expand(dir)
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(t.TempDir(), "e.yaml")
	if err := os.WriteFile(spec, []byte("name: e\nbase: {model: mlp, max-steps: 20, lr: 0.1}\nmatrix: {pipeline: [dense, pertensor]}"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "e")
	if err := SaveSpec(spec, out); err != nil {
		t.Fatal(err)
	}
	if err := SaveEnv(out, env); err != nil {
		t.Fatal(err)
	}
	back, backCells, err := LoadResults(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Env) != 2 || backCells[0].Config.LR != 0.5 || backCells[0].Config.MaxSteps != 40 {
		t.Errorf("read back: environment %v, lr %g, max-steps %d", back.Env, backCells[0].Config.LR, backCells[0].Config.MaxSteps)
	}
	for _, bad := range []map[string]string{{"lrr": "1"}, {"out": "/tmp"}, {"lr": "fast"}} {
		s.Env = bad
		if _, err := s.Expand(t.TempDir()); err == nil || !strings.Contains(err.Error(), "SSF_") {
			t.Errorf("environment %v: %v, want an error naming the variable", bad, err)
		}
	}
}
