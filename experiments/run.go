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
	// Train runs one cell's training, which writes summary.json into cell.Config.Out;
	// resume asks it to continue from the checkpoint an interrupted run left there.
	Train func(ctx context.Context, cell Cell, resume bool) error
	// Force reruns cells that already finished, from scratch.
	Force bool
	// Progress, if set, is called before each cell with its position and what is done
	// with it.
	Progress func(i, n int, cell Cell, action Action)
}

// Action is what the runner does with a cell.
type Action int

const (
	Start  Action = iota // train from the first step
	Resume               // continue from the checkpoint of an interrupted run
	Skip                 // an earlier run finished it
)

func (a Action) String() string {
	return [...]string{"start", "resume", "skip"}[a]
}

// Run runs every cell that has not finished yet, resuming those that left a checkpoint,
// and reports how many it ran. It stops at the first failure, with an error naming the
// cell; finished cells keep their results.
func (r Runner) Run(ctx context.Context, cells []Cell) (ran int, err error) {
	for i, cell := range cells {
		action, err := r.action(cell)
		if err != nil {
			return ran, fmt.Errorf("cell %s: %w", cell.Name, err)
		}
		if r.Progress != nil {
			r.Progress(i, len(cells), cell, action)
		}
		if action == Skip {
			continue
		}
		if err := ctx.Err(); err != nil {
			return ran, fmt.Errorf("before cell %s: %w", cell.Name, err)
		}
		if err := r.Train(ctx, cell, action == Resume); err != nil {
			return ran, fmt.Errorf("cell %s (%d of %d): %w", cell.Name, i+1, len(cells), err)
		}
		ran++
	}
	return ran, nil
}

// action decides what to do with cell; under Force it also clears the cell's checkpoint,
// so that the rerun starts from scratch.
func (r Runner) action(cell Cell) (Action, error) {
	dir := cell.Config.Out
	if r.Force {
		if err := os.RemoveAll(filepath.Join(dir, "checkpoint")); err != nil {
			return Start, fmt.Errorf("clearing the old checkpoint: %w", err)
		}
		return Start, nil
	}
	done, err := Finished(dir)
	switch {
	case err != nil:
		return Start, err
	case done:
		return Skip, nil
	case trainer.HasCheckpoint(dir):
		return Resume, nil
	}
	return Start, nil
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
