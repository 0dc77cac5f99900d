package pipelinetest

import (
	"fmt"

	"github.com/ssfusion/ssfusion/pipeline"
)

// CheckResume runs a pipeline for steps steps straight through, and again as split steps,
// a checkpoint (every rank's pipeline.State) and a fresh pipeline restored from it for the
// remaining steps. It reports the first gradient of the resumed steps that differs, in any
// bit, from the uninterrupted run's: what a checkpoint must guarantee.
func CheckResume(world int, sizes []int, steps, split int, grads func(rank, step int) [][]float32, newPipe Factory) error {
	if split <= 0 || split >= steps {
		return fmt.Errorf("split %d must lie inside (0, %d)", split, steps)
	}
	straight, err := Run(world, sizes, nil, steps, grads, newPipe)
	if err != nil {
		return fmt.Errorf("uninterrupted run: %w", err)
	}
	upTo, err := Run(world, sizes, nil, split, grads, newPipe)
	if err != nil {
		return fmt.Errorf("run up to the checkpoint: %w", err)
	}
	states := make([]pipeline.State, world)
	for r, res := range upTo {
		states[r] = res.State
	}
	resumed, err := Job{World: world, Sizes: sizes, Steps: steps - split, Grads: grads, New: newPipe, Restore: states}.Run()
	if err != nil {
		return fmt.Errorf("resumed run: %w", err)
	}
	for r := range resumed {
		if err := sameGrads(resumed[r].Grads, straight[r].Grads[split:]); err != nil {
			return fmt.Errorf("rank %d, counting steps from the resume at step %d: resumed against uninterrupted: %w", r, split, err)
		}
	}
	return nil
}
