package pipelinetest

import (
	"fmt"
	"sync"

	"github.com/ssfusion/ssfusion/dist"
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
	var mu sync.Mutex
	first := make([]pipeline.Pipeline, world)
	_, err = Run(world, sizes, nil, split, grads, func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		p, err := newPipe(comm, tensors)
		mu.Lock()
		first[comm.Rank()] = p
		mu.Unlock()
		return p, err
	})
	if err != nil {
		return fmt.Errorf("run up to the checkpoint: %w", err)
	}
	states := make([]pipeline.State, world)
	for r, p := range first {
		sp, ok := p.(pipeline.Stateful)
		if !ok {
			return fmt.Errorf("%T is not pipeline.Stateful", p)
		}
		if states[r], err = sp.State(); err != nil {
			return fmt.Errorf("rank %d: taking the state: %w", r, err)
		}
	}
	later := func(rank, step int) [][]float32 { return grads(rank, split+step) }
	resumed, err := Run(world, sizes, nil, steps-split, later, func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		p, err := newPipe(comm, tensors)
		if err != nil {
			return nil, err
		}
		if err := p.(pipeline.Stateful).Restore(states[comm.Rank()]); err != nil {
			p.Close()
			return nil, err
		}
		return p, nil
	})
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
