package pipelinetest

import (
	"fmt"

	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/pipeline"
)

// CheckResume runs a pipeline for steps steps straight through, and again as split steps,
// a checkpoint (every rank's pipeline.State) and a fresh pipeline restored from it for the
// remaining steps. It reports the first gradient of the resumed steps that differs, in any
// bit, from the uninterrupted run's: what a checkpoint must guarantee.
func CheckResume(world int, sizes []int, steps, split int, grads func(rank, step int) [][]float32, newPipe Factory) error {
	return Job{World: world, Sizes: sizes, Steps: steps, Grads: grads, New: newPipe}.CheckResume(split)
}

// CheckResume is CheckResume for the job's tensors and settings, j.Steps steps in all. A
// pipeline that keeps no state (not a pipeline.Stateful) resumes as a fresh pipeline.
func (j Job) CheckResume(split int) error {
	steps, world := j.Steps, j.World
	if split <= 0 || split >= steps {
		return fmt.Errorf("split %d must lie inside (0, %d)", split, steps)
	}
	straight, err := j.Run()
	if err != nil {
		return fmt.Errorf("uninterrupted run: %w", err)
	}
	first := j
	first.Steps = split
	upTo, err := first.Run()
	if err != nil {
		return fmt.Errorf("run up to the checkpoint: %w", err)
	}
	rest := j
	rest.Steps = steps - split
	if stateful(j) {
		rest.Restore = make([]pipeline.State, world)
		for r, res := range upTo {
			rest.Restore[r] = res.State
		}
	} else {
		rest.Start = split
	}
	resumed, err := rest.Run()
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

// stateful reports whether the job's pipeline keeps state, building one on a lone rank.
func stateful(j Job) bool {
	if j.Tensors == nil {
		j.Tensors = func() []pipeline.Tensor { return Tensors(j.Sizes) }
	}
	comm := inproc.New(1)[0]
	defer comm.Close()
	p, err := j.New(comm, j.Tensors())
	if err != nil {
		return true // the resumed run reports the error
	}
	defer p.Close()
	_, ok := p.(pipeline.Stateful)
	return ok
}
