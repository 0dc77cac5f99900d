package validate

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/experiments"
)

// TestRun: Run trains the experiment's runs through the trainer and display it is given,
// measures again the runs whose predictions missed, and refuses before any training an
// experiment it cannot run. The runs are faked: each writes the tiny profile and a step
// time of 1 ms.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	base := "base: {model: mlp, dataset: synthetic, workers: 2, bandwidth: 60Mbit}\n"
	good := write("good.yaml", "name: good\n"+base+"matrix: {pipeline: [dense, pertensor]}\n")
	for _, tc := range []struct {
		name       string
		experiment string
		tolerance  float64
		trainings  int    // runs trained, counting those measured again
		want       string // in the log, or in the error when trainings is 0
	}{
		{"every prediction within tolerance", good, math.Inf(1), 2, "validation: measuring 2 runs of " + good + " (kept in "},
		{"every prediction missed", good, 0, 4, "validation: measuring 2 runs again, whose predictions missed by more than 0%"},
		{"missing experiment", filepath.Join(dir, "missing.yaml"), 1, 0, "missing.yaml"},
		{"unknown key", write("key.yaml", "name: key\n"+base+"matrix: {colour: [red]}\n"), 1, 0, "experiment " + filepath.Join(dir, "key.yaml")},
		{"unknown pipeline", write("pipe.yaml", "name: pipe\n"+base+"matrix: {pipeline: [fastest]}\n"), 1, 0, "exclude"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			trainings, shown := 0, 0
			c := Config{
				Experiment: tc.experiment, Results: t.TempDir(), Tolerance: tc.tolerance,
				Train: func(_ context.Context, cell experiments.Cell, _ bool) error {
					trainings++
					return fakeRun(cell.Config, 1)
				},
				Progress: func(int, int, experiments.Cell, experiments.Action, []string) { shown++ },
				Logf:     func(format string, args ...any) { log = append(log, fmt.Sprintf(format, args...)) },
			}
			val, err := Run(context.Background(), c)
			if tc.trainings == 0 {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %v, want one naming %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if trainings != tc.trainings || shown != tc.trainings || len(val.Rows) != 2 {
				t.Errorf("%d trainings, %d shown, %d rows; want %d, %d and 2", trainings, shown, len(val.Rows), tc.trainings, tc.trainings)
			}
			if !strings.Contains(strings.Join(log, "\n"), tc.want) {
				t.Errorf("log %q lacks %q", log, tc.want)
			}
		})
	}
}
