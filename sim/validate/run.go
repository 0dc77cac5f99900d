package validate

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/ssfusion/ssfusion/experiments"
	"github.com/ssfusion/ssfusion/sim"
)

// Config is a validation of the simulator: the experiment whose runs it measures, where
// they are kept, and how each run is trained and shown.
type Config struct {
	Experiment string  // the experiment file, e.g. experiments/validation.yaml
	Results    string  // folder that receives the experiment's folder
	Tolerance  float64 // the largest relative error of a prediction accepted
	// Train and Progress train and show each run, as in experiments.Runner.
	Train    func(ctx context.Context, cell experiments.Cell, resume bool) error
	Progress func(i, n int, cell experiments.Cell, action experiments.Action, changed []string)
	// Logf, if set, is told which runs are measured, and why.
	Logf func(format string, args ...any)
}

// Run trains the experiment's runs (once: finished runs are kept in Results for later
// validations) and predicts each from the profile it measured, as Validator.Validate does.
// Every run is checked before the first trains, as experiments.Preflight checks them.
// The runs select on this machine's CPU, so they are predicted with the CPU model as
// fitted here (sim.DefaultSelectionModel), whichever model a sweep uses.
func Run(ctx context.Context, c Config) (*sim.Validation, error) {
	spec, err := experiments.Load(c.Experiment)
	if err != nil {
		return nil, err
	}
	cells, err := spec.Expand(c.Results)
	if err != nil {
		return nil, fmt.Errorf("experiment %s: %w", c.Experiment, err)
	}
	if err := experiments.Preflight(c.Experiment, cells); err != nil {
		return nil, err
	}
	logf, kept := c.Logf, filepath.Join(c.Results, spec.Name)
	if logf == nil {
		logf = func(string, ...any) {}
	}
	v := &Validator{Selection: sim.DefaultSelectionModel(), Tolerance: c.Tolerance}
	v.Train = func(cells []experiments.Cell, force bool) error {
		if force {
			logf("validation: measuring %d runs again, whose predictions missed by more than %.0f%%", len(cells), 100*c.Tolerance)
		} else {
			logf("validation: measuring %d runs of %s (kept in %s for later runs)", len(cells), c.Experiment, kept)
		}
		r := experiments.Runner{Train: c.Train, Progress: c.Progress, Force: force}
		_, err := r.Run(ctx, cells)
		return err
	}
	return v.Validate(ctx, cells)
}
