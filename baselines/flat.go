package baselines

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/fusion"
	"github.com/ssfusion/ssfusion/pipeline"
)

// flatGradient is what the pipelines that select over the whole model at once (ExDyna,
// Ok-Topk) share instead of the fusion engine: the gradient of all tensors laid end to end
// in tensor-id order (the parameter order every rank shares, whatever the backprop order),
// accumulated with error feedback as each tensor is pushed; the push bookkeeping and step
// meter; the step count; and the checkpointed state. Its Push, Metrics and Close are the
// pipelines' own.
type flatGradient struct {
	name     string // the pipeline's, for errors
	comm     dist.Communicator
	gatherer *dist.Gatherer // the step's allgather, whose result is read before the next
	tensors  []pipeline.Tensor
	cfg      compress.Config
	offsets  []int // by tensor id: first element in the flattened gradient; offsets[len] = N
	pushes   *pipeline.Pushes
	meter    *fusion.Meter
	clock    pipeline.Clock
	mem      *compress.Memory
	flat     []float32 // the accumulators of all tensors end to end, bound into mem

	steps   int64 // steps finished
	failed  error // why a Push of the current step failed
	metrics pipeline.StepMetrics
	iota    []int32   // 0, 1, ...: every index of the largest tensor, for a dense step's Sent
	dense   []float32 // the sums of a dense step
}

// newFlatGradient checks the configuration and the tensors (ids must be positions, and
// every element must have a 32-bit index) and binds the memory to one flat buffer.
func newFlatGradient(name string, comm dist.Communicator, tensors []pipeline.Tensor, cfg compress.Config) (flatGradient, error) {
	f := flatGradient{name: name, comm: comm, gatherer: dist.NewGatherer(comm), tensors: tensors, cfg: cfg}
	if err := cfg.Check(); err != nil {
		return f, fmt.Errorf("%s: %w", name, err)
	}
	f.offsets = make([]int, len(tensors)+1)
	for i, t := range tensors {
		if t.ID != i {
			return f, fmt.Errorf("%s: tensor %q at position %d has id %d: ids must be positions", name, t.Name, i, t.ID)
		}
		f.offsets[i+1] = f.offsets[i] + len(t.Grad)
	}
	if n := f.numel(); n > math.MaxInt32 {
		return f, fmt.Errorf("%s: %d gradient elements do not fit 32-bit indices", name, n)
	}
	if p := comm.Size(); p < 1 {
		return f, fmt.Errorf("%s: communicator of %d ranks", name, p)
	}
	mem, err := compress.NewMemory(pipeline.Sizes(tensors), cfg)
	if err != nil {
		return f, fmt.Errorf("%s: %w", name, err)
	}
	f.mem, f.flat = mem, make([]float32, f.numel())
	f.pushes, f.meter, f.clock = pipeline.NewPushes(tensors), fusion.NewMeter(comm, tensors), pipeline.ClockOf(comm)
	for id := range tensors {
		if err := mem.Bind(id, f.flat[f.offsets[id]:f.offsets[id+1]]); err != nil {
			return f, err
		}
	}
	return f, nil
}

func (f *flatGradient) numel() int { return f.offsets[len(f.tensors)] }

// Push implements pipeline.Pipeline: it adds the gradient into the memory. A non-finite
// element is refused before it gets there: no threshold can make sense of it, and a
// worker may send its value wherever another worker selects.
func (f *flatGradient) Push(id int, grad []float32) error {
	if err := f.pushes.Push(id, grad); err != nil {
		return err
	}
	f.meter.Begin()
	if err := f.accumulate(id, grad); err != nil {
		if f.failed == nil {
			f.failed = err
		}
		return err
	}
	return nil
}

func (f *flatGradient) accumulate(id int, grad []float32) error {
	for i, v := range grad {
		if !compress.Finite(v) {
			return fmt.Errorf("%s: gradient of %s: %w", f.name, f.tensors[id].Name, &compress.NonFiniteError{Index: i, Value: v})
		}
	}
	_, err := f.mem.Accumulate(id, grad)
	return err
}

// runStep is the frame of Wait: once every tensor was pushed it runs the step with the
// step's number and k, then records its metrics; the next step starts afresh either way.
func (f *flatGradient) runStep(run func(step, k int) error) error {
	start := f.clock.Now()
	defer f.nextStep()
	f.meter.Begin()
	if f.failed != nil {
		return f.failed
	}
	if err := f.pushes.Complete(); err != nil {
		return err
	}
	step := int(f.steps)
	if err := run(step, compress.KFor(f.numel(), f.cfg.DensityAt(step))); err != nil {
		return err
	}
	f.metrics = f.meter.Finish(f.clock.Since(start), true)
	return nil
}

func (f *flatGradient) nextStep() {
	f.steps++
	f.pushes.Reset()
	f.meter.Reset() // a failed step's figures must not run into the next
	f.failed = nil
}

// Metrics implements pipeline.Pipeline.
func (f *flatGradient) Metrics() pipeline.StepMetrics { return f.metrics }

// Close implements pipeline.Pipeline; the communicator belongs to the caller.
func (f *flatGradient) Close() error { return nil }

// averageAll is a step that sends everything: it sums every accumulated element over the
// ranks, writes the average into every Grad and clears the memory.
func (f *flatGradient) averageAll() error {
	f.dense = append(f.dense[:0], f.flat...)
	if err := f.comm.AllReduce(f.dense, dist.Sum); err != nil {
		return fmt.Errorf("%s: allreduce of the dense gradient: %w", f.name, err)
	}
	world := float32(f.comm.Size())
	for id, t := range f.tensors {
		for i, v := range f.dense[f.offsets[id]:f.offsets[id+1]] {
			t.Grad[i] = v / world
		}
		for i := len(f.iota); i < len(t.Grad); i++ {
			f.iota = append(f.iota, int32(i))
		}
		if err := f.mem.Sent(id, f.iota[:len(t.Grad)]); err != nil {
			return err
		}
	}
	f.meter.Selected(0, f.numel(), 0)
	return nil
}

// Ok-Topk's and SparDL's allgathers carry, from rank j, (u32 index, f32 value) pairs,
// little-endian, of elements of its part [bounds[j], bounds[j+1]) of the flattened
// gradient, indices ascending.
const pairBytes = 8

// appendParts decodes such allgathered messages into idx and vals, checking every pair;
// the result is ascending, since the parts are.
func (f *flatGradient) appendParts(idx []int32, vals []float32, msgs [][]byte, bounds []int) ([]int32, []float32, error) {
	for j, m := range msgs {
		if len(m)%pairBytes != 0 {
			return idx, vals, fmt.Errorf("%s: rank %d sent %d bytes of pairs, not whole pairs", f.name, j, len(m))
		}
		lo, hi := bounds[j], bounds[j+1]
		prev := lo - 1
		for i := 0; i < len(m); i += pairBytes {
			at := int(binary.LittleEndian.Uint32(m[i:]))
			v := math.Float32frombits(binary.LittleEndian.Uint32(m[i+4:]))
			if at <= prev || at >= hi || !compress.Finite(v) {
				return idx, vals, fmt.Errorf("%s: rank %d sent element %d = %g outside its part [%d, %d) or out of order", f.name, j, at, v, lo, hi)
			}
			prev = at
			idx, vals = append(idx, int32(at)), append(vals, v)
		}
	}
	return idx, vals, nil
}

// averageAt writes the average over the ranks of vals at the ascending indices idx into the
// tensors' Grad, zero elsewhere, and returns how many non-empty tensors got nothing.
func (f *flatGradient) averageAt(idx []int32, vals []float32) (missing int) {
	world := float32(f.comm.Size())
	s := 0
	for id, t := range f.tensors {
		clear(t.Grad)
		lo, hi := f.offsets[id], f.offsets[id+1]
		first := s
		for ; s < len(idx) && int(idx[s]) < hi; s++ {
			t.Grad[int(idx[s])-lo] = vals[s] / world
		}
		if s == first && hi > lo {
			missing++
		}
	}
	return missing
}

// state is the checkpointed state: the step count, the memory and the pipeline's extra.
func (f *flatGradient) state(extra []byte) pipeline.State {
	st := pipeline.State{Steps: f.steps, Extra: extra}
	st.Residuals, st.Momenta = f.mem.Export()
	return st
}

// restore adopts a checkpointed state into a pipeline that has not run, through the
// pipeline's encoder and checked decoder of its extra state. Everything is checked
// before anything changes: the extra by decode, which must change nothing on error, the
// memory by fitting it.
func (f *flatGradient) restore(st pipeline.State, encode func() []byte, decode func([]byte) error) error {
	if f.steps != 0 {
		return fmt.Errorf("%s: restoring state into a pipeline that has already run", f.name)
	}
	if st.Steps < 0 {
		return fmt.Errorf("%s: restoring state with a negative step count %d", f.name, st.Steps)
	}
	saved := encode()
	if err := decode(st.Extra); err != nil {
		return fmt.Errorf("restoring state: %w", err)
	}
	if err := f.mem.Restore(st.Residuals, st.Momenta); err != nil {
		decode(saved)
		return fmt.Errorf("%s: %w", f.name, err)
	}
	f.steps = st.Steps
	return nil
}
