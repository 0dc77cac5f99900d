package experiments

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ssfusion/ssfusion/internal/faults"
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
	// with it; for Rerun, changed lists the settings that differ, as trainer.Changed
	// gives them.
	Progress func(i, n int, cell Cell, action Action, changed []string)
}

// Action is what the runner does with a cell.
type Action int

const (
	Start  Action = iota // train from the first step
	Resume               // continue from the checkpoint of an interrupted run
	Skip                 // an earlier run finished it
	Rerun                // train from the first step: the results or checkpoint there came from other settings
)

func (a Action) String() string {
	return [...]string{"start", "resume", "skip", "rerun"}[a]
}

// Run runs every cell that has not finished yet, resuming those that left a checkpoint,
// and reports how many it ran. It stops at the first failure, with an error naming the
// cell; finished cells keep their results.
func (r Runner) Run(ctx context.Context, cells []Cell) (ran int, err error) {
	for i, cell := range cells {
		action, changed, err := r.action(cell)
		if err != nil {
			return ran, fmt.Errorf("cell %s: %w", cell.Name, err)
		}
		if r.Progress != nil {
			r.Progress(i, len(cells), cell, action, changed)
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
		if err := faults.At(faults.CellDone, ""); err != nil {
			return ran, fmt.Errorf("after cell %s: %w", cell.Name, err)
		}
	}
	return ran, nil
}

// action decides what to do with cell. A finished cell is skipped and an interrupted one
// resumed only when its results (summary.json) or checkpoint came from the cell's
// result-shaping settings; otherwise it is trained again from scratch, and changed lists
// the settings that differ. Under Force every cell starts from scratch. Starting from
// scratch clears the cell's checkpoint.
func (r Runner) action(cell Cell) (Action, []string, error) {
	dir := cell.Config.Out
	again := func(a Action, changed []string) (Action, []string, error) {
		if err := os.RemoveAll(filepath.Join(dir, "checkpoint")); err != nil {
			return a, changed, fmt.Errorf("clearing the old checkpoint: %w", err)
		}
		return a, changed, nil
	}
	if r.Force {
		return again(Start, nil)
	}
	s, err := readSummary(dir)
	if err != nil && !errors.Is(err, errCorruptSummary) {
		return Start, nil, err
	}
	if s != nil { // a corrupt summary is none: running the cell again replaces it
		changed, err := differs(s, cell)
		if err != nil {
			return Start, nil, err
		}
		if len(changed) > 0 {
			return again(Rerun, changed)
		}
		if s.Complete {
			return Skip, nil, nil
		}
	}
	if !trainer.HasCheckpoint(dir) {
		return Start, nil, nil
	}
	saved, err := trainer.ReadCheckpointConfig(dir)
	if err != nil {
		return Start, nil, err
	}
	changed, err := trainer.Changed(saved, cell.Config)
	if err != nil {
		return Start, nil, err
	}
	if len(changed) > 0 {
		return again(Rerun, changed)
	}
	return Resume, nil, nil
}

// differs lists why the results s describes are not those of cell: the result-shaping
// settings that differ (trainer.Changed), a build whose results differ, and steps that ran
// under other settings before a resumption (--resume-changed). None when they are the cell's.
func differs(s *trainer.Summary, cell Cell) ([]string, error) {
	changed, err := trainer.Changed(s.Config, cell.Config)
	if err != nil {
		return nil, err
	}
	if s.ResultsVersion != trainer.ResultsVersion {
		changed = append(changed, fmt.Sprintf("made by a build whose results differ (results version %d, now %d)", s.ResultsVersion, trainer.ResultsVersion))
	}
	for _, c := range s.ConfigChanges {
		// Its last settings are the cell's, but its earlier steps ran under others.
		changed = append(changed, fmt.Sprintf("steps before %d ran under other settings (%s)", c.Step, strings.Join(c.Changed, "; ")))
	}
	return changed, nil
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
