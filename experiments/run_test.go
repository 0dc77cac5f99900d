package experiments

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestRunnerResumes(t *testing.T) {
	dir := t.TempDir()
	s, err := Parse([]byte("name: e\nmatrix: {pipeline: [dense, pertensor, ssfusion]}"))
	if err != nil {
		t.Fatal(err)
	}
	cells, err := s.Expand(dir)
	if err != nil {
		t.Fatal(err)
	}
	write := func(cell Cell, body string) { writeSummary(t, cell.Config.Out, []byte(body)) }
	// The first cell finished earlier; the second was interrupted; the third never ran.
	write(cells[0], `{"complete": true}`)
	write(cells[1], `{"complete": false}`)
	var trained, skipped []string
	r := Runner{
		Train: func(_ context.Context, c Cell) error {
			trained = append(trained, c.Config.Pipeline)
			write(c, `{"complete": true}`)
			return nil
		},
		Progress: func(_, _ int, c Cell, skip bool) {
			if skip {
				skipped = append(skipped, c.Config.Pipeline)
			}
		},
	}
	ran, err := r.Run(context.Background(), cells)
	if err != nil {
		t.Fatal(err)
	}
	if ran != 2 || !slices.Equal(trained, []string{"pertensor", "ssfusion"}) || !slices.Equal(skipped, []string{"dense"}) {
		t.Fatalf("ran %d %v, skipped %v; want the unfinished pertensor and ssfusion", ran, trained, skipped)
	}
	// Everything is finished now: a second run does nothing, unless forced.
	trained = nil
	if ran, err := r.Run(context.Background(), cells); err != nil || ran != 0 {
		t.Fatalf("second run: ran %d, %v", ran, err)
	}
	r.Force = true
	if ran, err := r.Run(context.Background(), cells); err != nil || ran != 3 {
		t.Fatalf("forced run: ran %d, %v", ran, err)
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
	r := Runner{Train: func(_ context.Context, c Cell) error {
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
