package fusion

import (
	"fmt"
	"sync/atomic"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/pipeline"
)

// A Stage is what one fusing pipeline does differently from another: how a gradient is
// prepared (copied, selected, ...), which collectives a step issues and how their results
// land in the gradients. Fusion drives a Stage and does the rest: checking pushes, learning
// the fusion plan, ordering collectives and measuring the step.
type Stage interface {
	// Plan is called when the fusion plan is known, with the Engine to call back. It
	// returns the collectives each step issues, as the number of parts each one waits for
	// (see Engine.Done), and whether they must run one at a time. Plan is called once,
	// unless the stage asks for a new plan with Engine.Replan: then it is called again,
	// between two steps, and must rebuild what depends on the buffers while keeping what
	// outlives a step (error-feedback memory).
	Plan(e Engine, buckets []Bucket) (parts []int, serial bool, err error)
	// Process prepares tensor id's gradient for this step; it runs on the pushing goroutine
	// and calls Engine.Done for every part of a collective the gradient completes, possibly
	// later from another goroutine. slot says where the tensor sits in the plan and whether
	// it is the last of its bucket to arrive this step. grad is valid only during the call.
	Process(id int, slot Slot, grad []float32) error
	// Issue starts collective i of the step; it runs on the controller's goroutine.
	Issue(i int) Completion
	// Finish writes the step's aggregated gradients into the tensors once every collective
	// has completed.
	Finish() error
	// Close releases what the stage started.
	Close() error
}

// Engine is what a Stage may call back into the Fusion that drives it.
type Engine interface {
	// Done reports one part of collective i of the current step as prepared. In every step,
	// collective i must be reported done exactly parts[i] times, parts as Plan returned
	// them: the collective is issued after its last part (and after every collective
	// before it in the plan), so a missing call stalls the step and an extra one corrupts
	// the next. A part may be reported from any goroutine, also after Process returned
	// (offloaded selection), but before the step's collectives are waited for.
	Done(i int)
	// Fail stops the step: no further collective is issued and Wait returns err. Safe
	// for concurrent use.
	Fail(err error)
	// Step is the index of the current step, counting from 0. Safe for concurrent use.
	Step() int
	// Clock is the time the pipeline runs on: its communicator's (see pipeline.ClockOf).
	Clock() pipeline.Clock
	// Meter is the step's meter, for recording selections (it is a compress.Recorder)
	// and elements sent densely.
	Meter() *Meter
	// Replan asks for a new fusion plan from the next step on (see Fusion.Replan).
	Replan(buckets []Bucket) error
	// Replayed reports whether the gradients of the current step reach the stage by
	// replay, at the end of the first step's backward (see Fusion.Replayed).
	Replayed() bool
}

// Fusion is a Pipeline made of a Stage: tensor fusion in backprop order with the stage's
// preparation and collectives.
type Fusion struct {
	stage       Stage
	sparsifying bool
	clock       pipeline.Clock
	step        *Stepper
	meter       *Meter
	ctl         *Controller
	parts       []int
	pending     []atomic.Int32 // by collective: parts still to come this step
	arrived     []int          // by bucket: tensors pushed this step
	begun       bool
	broken      error           // the stage could not plan: every later call fails with it
	steps       atomic.Int64    // steps finished; read by selection goroutines
	restored    *pipeline.State // state to move into the memory once the stage plans it
	replan      []Bucket        // the plan to adopt when the step ends, see Replan
	replayed    bool            // the step's gradients are replayed, see Replayed
	metrics     pipeline.StepMetrics
}

var _ Engine = (*Fusion)(nil)

// New returns the pipeline that runs stage over comm with fusion buffers of up to
// thresholdBytes. A sparsifying pipeline reports density and missing tensors.
func New(comm dist.Communicator, tensors []pipeline.Tensor, thresholdBytes int, stage Stage, sparsifying bool) (*Fusion, error) {
	step, err := NewStepper(comm, tensors, thresholdBytes)
	if err != nil {
		return nil, err
	}
	return &Fusion{stage: stage, sparsifying: sparsifying, clock: pipeline.ClockOf(comm), step: step, meter: NewMeter(comm, tensors)}, nil
}

// Clock implements Engine.
func (f *Fusion) Clock() pipeline.Clock { return f.clock }

// Meter implements Engine.
func (f *Fusion) Meter() *Meter { return f.meter }

// Done implements Engine.
func (f *Fusion) Done(i int) {
	f.ctl.Stamp(i, f.clock.Now())
	if f.pending[i].Add(-1) == 0 {
		f.ctl.Ready(i)
	}
}

// Fail implements Engine.
func (f *Fusion) Fail(err error) { f.ctl.Fail(err) }

// Replan asks for a new fusion plan: once the current step has finished (after the stage's
// Finish), the stage's Plan is called again with buckets and the following steps run with
// them. buckets must cut the agreed backprop order into consecutive buffers (GroupBuckets
// builds them); they are checked now, so a bad plan is an error for the caller, not a
// broken pipeline. Every rank must replan alike in the same step, since the collectives of
// later steps follow the plan.
//
// Call it from the stage's Process or Finish, which run on the goroutine that calls Push
// and Wait. A replan asked for in a step that fails is dropped; a later call in the same
// step replaces an earlier one.
func (f *Fusion) Replan(buckets []Bucket) error {
	if f.broken != nil {
		return f.broken
	}
	if f.ctl == nil {
		return fmt.Errorf("pipeline: replanning before the first plan")
	}
	if err := f.step.CheckBuckets(buckets); err != nil {
		return fmt.Errorf("pipeline: replanning: %w", err)
	}
	f.replan = cloneBuckets(buckets)
	return nil
}

// Replayed reports whether the gradients of the current step reach the stage by replay:
// in the first step the plan is learnt at the end of backward, and only then are the
// step's gradients processed, all at once. A stage that times backward through its Process
// calls must skip such a step. Call it from Process or Finish.
func (f *Fusion) Replayed() bool { return f.replayed }

// process hands tensor id's gradient to the stage, with its slot and whether it completes
// its bucket this step.
func (f *Fusion) process(id int, grad []float32) error {
	slot := f.step.Slot(id)
	f.arrived[slot.Bucket]++
	slot.Last = f.arrived[slot.Bucket] == len(f.step.Buckets()[slot.Bucket].Tensors)
	return f.stage.Process(id, slot, grad)
}

// Push implements pipeline.Pipeline.
func (f *Fusion) Push(id int, grad []float32) error {
	if f.broken != nil {
		return f.broken
	}
	planned, err := f.step.Push(id, grad)
	if err != nil {
		return err
	}
	f.meter.Begin()
	if !planned {
		return nil
	}
	f.begin()
	if err := f.process(id, grad); err != nil {
		f.ctl.Fail(err)
		return err
	}
	return nil
}

// begin starts the step's controller, once.
func (f *Fusion) begin() {
	if !f.begun {
		f.begun = true
		clear(f.arrived)
		for i, n := range f.parts {
			f.pending[i].Store(int32(n))
		}
		f.ctl.Begin()
		for i, n := range f.parts {
			if n == 0 {
				f.ctl.Ready(i)
			}
		}
	}
}

// Wait implements pipeline.Pipeline.
func (f *Fusion) Wait() error {
	start := f.clock.Now()
	if f.broken != nil {
		return f.broken
	}
	defer f.nextStep()
	f.meter.Begin()
	replay, err := f.step.EndBackward()
	if err != nil {
		return f.abort(err)
	}
	if replay != nil {
		if err := f.plan(); err != nil {
			return err
		}
		f.begin()
		f.replayed = true
		for _, id := range replay {
			if err := f.process(id, f.step.Tensors()[id].Grad); err != nil {
				return f.abort(err)
			}
		}
	}
	f.begin()
	if err := f.ctl.Wait(); err != nil {
		return err
	}
	if err := f.stage.Finish(); err != nil {
		return err
	}
	if f.replan != nil {
		// Nothing is in flight now: every collective of the step has completed and the
		// stage has written the gradients, so the buffers can be rebuilt.
		if err := f.applyReplan(); err != nil {
			return err
		}
	}
	f.metrics = f.meter.Finish(f.clock.Since(start), f.sparsifying)
	return nil
}

// applyReplan adopts the plan Replan asked for.
func (f *Fusion) applyReplan() error {
	buckets := f.replan
	f.replan = nil
	if err := f.step.Rebucket(buckets); err != nil {
		f.broken = fmt.Errorf("replanning the pipeline: %w", err)
		return f.broken
	}
	return f.plan()
}

func (f *Fusion) plan() error {
	parts, serial, err := f.stage.Plan(f, f.step.Buckets())
	if err != nil {
		f.broken = fmt.Errorf("planning the pipeline: %w", err)
		return f.broken
	}
	f.parts = parts
	f.arrived = make([]int, len(f.step.Buckets()))
	f.pending = make([]atomic.Int32, len(parts))
	f.ctl = NewController(f.clock, len(parts), serial, f.stage.Issue)
	if err := f.applyRestored(); err != nil {
		f.broken = err
		return err
	}
	return nil
}

// abort fails a step that may have collectives in flight and waits for them.
func (f *Fusion) abort(err error) error {
	if f.begun {
		f.ctl.Fail(err)
		f.ctl.Wait()
	}
	return err
}

// Step is the index of the current step, counting from 0. Safe for concurrent use.
func (f *Fusion) Step() int { return int(f.steps.Load()) }

func (f *Fusion) nextStep() {
	f.steps.Add(1)
	f.step.NextStep()
	f.meter.Reset()
	f.begun = false
	f.replan = nil // asked for in a step that failed
	f.replayed = false
}

// Metrics implements pipeline.Pipeline.
func (f *Fusion) Metrics() pipeline.StepMetrics { return f.metrics }

// Close implements pipeline.Pipeline; the communicator belongs to the caller.
func (f *Fusion) Close() error { return f.stage.Close() }

// NewCompressor returns the compressor of a stage planned by e: its selections are timed
// on e's clock, follow e's step for the density schedule and are recorded in e's meter.
// sels gives one selector per goroutine that selects (see compress.NewCompressor).
func NewCompressor(e Engine, cfg compress.Config, sizes []int, sels ...compress.Selector) (*compress.Compressor, error) {
	return compress.NewCompressor(cfg, sizes, sels, e.Clock(), e.Meter(), e.Step)
}
