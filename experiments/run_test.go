package experiments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/trainer"
)

func TestRunnerResumes(t *testing.T) {
	dir := t.TempDir()
	s, err := Parse([]byte("name: e\nmatrix: {pipeline: [dense, pertensor, ssfusion, multitensor]}"))
	if err != nil {
		t.Fatal(err)
	}
	cells, err := s.Expand(dir)
	if err != nil {
		t.Fatal(err)
	}
	write := func(cell Cell, complete bool) { writeSummary(t, cell.Config.Out, summaryOf(t, cell.Config, complete)) }
	// The first cell finished earlier; the second was interrupted before its first
	// checkpoint, the third after one; the fourth never ran.
	write(cells[0], true)
	write(cells[1], false)
	write(cells[2], false)
	writeCheckpoint(t, cells[2].Config)
	var trained, actions []string
	r := Runner{
		Train: func(_ context.Context, c Cell, resume bool) error {
			trained = append(trained, fmt.Sprintf("%s resume=%v", c.Config.Pipeline, resume))
			write(c, true)
			return nil
		},
		Progress: func(_, _ int, c Cell, a Action, _ []string) {
			actions = append(actions, c.Config.Pipeline+" "+a.String())
		},
	}
	ran, err := r.Run(context.Background(), cells)
	if err != nil {
		t.Fatal(err)
	}
	wantTrained := []string{"pertensor resume=false", "ssfusion resume=true", "multitensor resume=false"}
	wantActions := []string{"dense skip", "pertensor start", "ssfusion resume", "multitensor start"}
	if ran != 3 || !slices.Equal(trained, wantTrained) || !slices.Equal(actions, wantActions) {
		t.Fatalf("ran %d %v, actions %v; want %v, %v", ran, trained, actions, wantTrained, wantActions)
	}
	// Everything is finished now: a second run does nothing, unless forced, and a forced
	// run starts from scratch, clearing checkpoints.
	trained = nil
	if ran, err := r.Run(context.Background(), cells); err != nil || ran != 0 {
		t.Fatalf("second run: ran %d, %v", ran, err)
	}
	writeCheckpoint(t, cells[3].Config)
	r.Force = true
	if ran, err := r.Run(context.Background(), cells); err != nil || ran != 4 {
		t.Fatalf("forced run: ran %d, %v", ran, err)
	}
	if slices.Contains(trained, "multitensor resume=true") || trainer.HasCheckpoint(cells[3].Config.Out) {
		t.Errorf("forced run resumed or kept a checkpoint: %v", trained)
	}
}

// writeCheckpoint leaves in cfg.Out the manifest of a checkpoint of a run of cfg, what
// trainer.HasCheckpoint and trainer.ReadCheckpointConfig look for.
func writeCheckpoint(t *testing.T, cfg trainer.Config) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(cfg.Out, "checkpoint"), 0o755); err != nil {
		t.Fatal(err)
	}
	body, err := trainer.CheckpointManifest(cfg, 2, cfg.Workers)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.Out, "checkpoint", "latest.json"), body, 0o644); err != nil {
		t.Fatal(err)
	}
}

// summaryOf is the summary.json of a run of cfg.
func summaryOf(t *testing.T, cfg trainer.Config, complete bool) []byte {
	t.Helper()
	body, err := json.Marshal(trainer.Summary{Config: cfg, Complete: complete, ResultsVersion: trainer.ResultsVersion})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestRunnerRerunsChangedCells: results and checkpoints from other result-shaping settings
// are not reused: the cell is trained again from scratch, naming what changed, while a
// change of a safe key (how often to evaluate) keeps them.
func TestRunnerRerunsChangedCells(t *testing.T) {
	dir := t.TempDir()
	expand := func(base string) []Cell {
		s, err := Parse([]byte("name: e\nbase: {model: mlp, " + base + "}\nmatrix: {pipeline: [dense, pertensor]}"))
		if err != nil {
			t.Fatal(err)
		}
		cells, err := s.Expand(dir)
		if err != nil {
			t.Fatal(err)
		}
		return cells
	}
	old := expand("max-steps: 20, lr: 0.1")
	writeSummary(t, old[0].Config.Out, summaryOf(t, old[0].Config, true))
	writeSummary(t, old[1].Config.Out, summaryOf(t, old[1].Config, false))
	writeCheckpoint(t, old[1].Config)

	type seen struct {
		action  Action
		changed []string
	}
	var got []seen
	var trained []bool
	r := Runner{
		Train:    func(_ context.Context, _ Cell, resume bool) error { trained = append(trained, resume); return nil },
		Progress: func(_, _ int, _ Cell, a Action, changed []string) { got = append(got, seen{a, changed}) },
	}
	if _, err := r.Run(context.Background(), expand("max-steps: 20, lr: 0.1, eval-every: 5")); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].action != Skip || got[1].action != Resume {
		t.Fatalf("after a safe change: %+v, want skip and resume", got)
	}
	got, trained = nil, nil
	if _, err := r.Run(context.Background(), expand("max-steps: 40, lr: 0.5")); err != nil {
		t.Fatal(err)
	}
	want := []string{"lr: 0.1 → 0.5", "max-steps: 20 → 40"}
	if len(got) != 2 || slices.Contains(trained, true) {
		t.Fatalf("after a change: %+v, trained (resume) %v; want two reruns from scratch", got, trained)
	}
	for i, g := range got {
		if g.action != Rerun || !slices.Equal(g.changed, want) {
			t.Errorf("cell %d: %v, changed %q; want a rerun, changed %q", i, g.action, g.changed, want)
		}
	}
	if trainer.HasCheckpoint(old[1].Config.Out) {
		t.Error("the checkpoint of the old settings was kept")
	}
	// Results of a build whose results differ are not this build's either.
	now := expand("max-steps: 40, lr: 0.5")
	older := trainer.Summary{Config: now[0].Config, Complete: true, ResultsVersion: trainer.ResultsVersion - 1}
	body, err := json.Marshal(older)
	if err != nil {
		t.Fatal(err)
	}
	writeSummary(t, now[0].Config.Out, body)
	got = nil
	if _, err := r.Run(context.Background(), now[:1]); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].action != Rerun || len(got[0].changed) != 1 || !strings.Contains(got[0].changed[0], "results version") {
		t.Errorf("results of an older build: %+v, want a rerun naming the results version", got)
	}
}

func TestRunnerStopsAtFailure(t *testing.T) {
	s, err := Parse([]byte("matrix: {workers: [1, 2, 3]}"))
	if err != nil {
		t.Fatal(err)
	}
	cells, err := s.Expand(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("worker died")
	calls := 0
	r := Runner{Train: func(_ context.Context, c Cell, _ bool) error {
		calls++
		if c.Config.Workers == 2 {
			return boom
		}
		return nil
	}}
	_, err = r.Run(context.Background(), cells)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "workers-2") || calls != 2 {
		t.Fatalf("error %v after %d calls, want the failure of cell workers-2 and no third call", err, calls)
	}
}

// TestRunnerFinishedCells: only a summary of a run that ended counts as finished; none,
// an interrupted run's ("complete": false) and a half-written one do not.
func TestRunnerFinishedCells(t *testing.T) {
	s, err := Parse([]byte("name: e\nmatrix: {pipeline: [dense]}"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		body func(Cell) []byte // nil: no file
		want Action
	}{
		{"no file", nil, Start},
		{"complete", func(c Cell) []byte { return summaryOf(t, c.Config, true) }, Skip},
		{"incomplete", func(c Cell) []byte { return summaryOf(t, c.Config, false) }, Start},
		{"half-written by something else", func(Cell) []byte { return []byte(`{"compl`) }, Start},
	} {
		cells, err := s.Expand(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if tc.body != nil {
			writeSummary(t, cells[0].Config.Out, tc.body(cells[0]))
		}
		var got Action
		r := Runner{Train: func(context.Context, Cell, bool) error { return nil },
			Progress: func(_, _ int, _ Cell, a Action, _ []string) { got = a }}
		if _, err := r.Run(context.Background(), cells); err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// writeSummary puts body into dir/summary.json, creating dir.
func writeSummary(t *testing.T, dir string, body []byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), body, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRunnerRerunsChangedBundle: a bundle's keys shape its cells' results like any swept
// value: changing one reruns the cells of that bundle alone, naming the key.
func TestRunnerRerunsChangedBundle(t *testing.T) {
	dir := t.TempDir()
	expand := func(warmup int) []Cell {
		s, err := Parse(fmt.Appendf(nil, `
name: e
base: {model: mlp, max-steps: 20}
matrix:
  recipe:
    - name: plain
    - {name: dgc, momentum-correction: true, density-warmup-steps: %d}
  pipeline: [pertensor]
`, warmup))
		if err != nil {
			t.Fatal(err)
		}
		cells, err := s.Expand(dir)
		if err != nil {
			t.Fatal(err)
		}
		return cells
	}
	for _, c := range expand(200) {
		writeSummary(t, c.Config.Out, summaryOf(t, c.Config, true))
	}
	var got []string
	r := Runner{
		Train: func(context.Context, Cell, bool) error { return nil },
		Progress: func(_, _ int, c Cell, a Action, changed []string) {
			got = append(got, fmt.Sprintf("%s %v %s", c.Name, a, strings.Join(changed, "; ")))
		},
	}
	if _, err := r.Run(context.Background(), expand(300)); err != nil {
		t.Fatal(err)
	}
	want := []string{"recipe-plain_pipeline-pertensor skip ", "recipe-dgc_pipeline-pertensor rerun density-warmup-steps: 200 → 300"}
	if !slices.Equal(got, want) {
		t.Errorf("after changing the dgc bundle: %q, want %q", got, want)
	}
}
