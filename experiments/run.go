package experiments

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ssfusion/ssfusion/trainer"
	"go.yaml.in/yaml/v3"
)

// Runner runs the cells of an experiment one after another.
type Runner struct {
	// Train runs one cell's training, which writes summary.json into cell.Config.Out.
	Train func(ctx context.Context, cell Cell) error
	// Force reruns cells that already finished.
	Force bool
	// Progress, if set, is called before each cell with its position and whether it is
	// skipped because an earlier run finished it.
	Progress func(i, n int, cell Cell, skipped bool)
}

// Run runs every cell that has not finished yet and reports how many it ran. It stops at
// the first failure, with an error naming the cell; finished cells keep their results.
func (r Runner) Run(ctx context.Context, cells []Cell) (ran int, err error) {
	for i, cell := range cells {
		done, err := Finished(cell.Config.Out)
		if err != nil {
			return ran, fmt.Errorf("cell %s: %w", cell.Name, err)
		}
		skip := done && !r.Force
		if r.Progress != nil {
			r.Progress(i, len(cells), cell, skip)
		}
		if skip {
			continue
		}
		if err := ctx.Err(); err != nil {
			return ran, fmt.Errorf("before cell %s: %w", cell.Name, err)
		}
		if err := r.Train(ctx, cell); err != nil {
			return ran, fmt.Errorf("cell %s (%d of %d): %w", cell.Name, i+1, len(cells), err)
		}
		ran++
	}
	return ran, nil
}

// Finished reports whether dir holds the summary.json of a training that ran to its end.
// A summary an interrupted run wrote ("complete": false) does not count, nor does none.
func Finished(dir string) (bool, error) {
	s, err := readSummary(dir)
	if errors.Is(err, errCorruptSummary) {
		// Not a finished run: running the cell again replaces it.
		return false, nil
	}
	if err != nil || s == nil {
		return false, err
	}
	return s.Complete, nil
}

// WriteConfig writes cfg as a YAML file of config keys, which `train --config` reads back
// into the same configuration.
func WriteConfig(cfg trainer.Config, path string) error {
	m, err := cfg.Keys()
	if err != nil {
		return err
	}
	data, err := yaml.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding the configuration: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return trainer.WriteFileAtomic(path, data)
}
