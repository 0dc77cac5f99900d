package experiments

import (
	"context"
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
	write := func(cell Cell, body string) { writeSummary(t, cell.Config.Out, []byte(body)) }
	// The first cell finished earlier; the second was interrupted before its first
	// checkpoint, the third after one; the fourth never ran.
	write(cells[0], `{"complete": true}`)
	write(cells[1], `{"complete": false}`)
	write(cells[2], `{"complete": false}`)
	writeCheckpoint(t, cells[2].Config.Out)
	var trained, actions []string
	r := Runner{
		Train: func(_ context.Context, c Cell, resume bool) error {
			trained = append(trained, fmt.Sprintf("%s resume=%v", c.Config.Pipeline, resume))
			write(c, `{"complete": true}`)
			return nil
		},
		Progress: func(_, _ int, c Cell, a Action) {
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
	writeCheckpoint(t, cells[3].Config.Out)
	r.Force = true
	if ran, err := r.Run(context.Background(), cells); err != nil || ran != 4 {
		t.Fatalf("forced run: ran %d, %v", ran, err)
	}
	if slices.Contains(trained, "multitensor resume=true") || trainer.HasCheckpoint(cells[3].Config.Out) {
		t.Errorf("forced run resumed or kept a checkpoint: %v", trained)
	}
}

// writeCheckpoint leaves what trainer.HasCheckpoint looks for in dir.
func writeCheckpoint(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "checkpoint"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checkpoint", "latest.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
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

func TestFinished(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		body string
		want bool
	}{
		{"", false}, // no file
		{`{"complete": true}`, true},
		{`{"complete": false}`, false},
		{`{"compl`, false}, // half-written by something else
	} {
		if tc.body != "" {
			if err := os.WriteFile(filepath.Join(dir, "summary.json"), []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := Finished(dir); err != nil || got != tc.want {
			t.Errorf("summary %q: finished %v, %v; want %v", tc.body, got, err, tc.want)
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
