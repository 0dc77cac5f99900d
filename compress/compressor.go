package compress

import (
	"fmt"
	"time"

	"github.com/ssfusion/ssfusion/pipeline"
)

// Recorder is where a Compressor reports each selection: how long it took, how many
// elements it picked and how many tensors it left without any. A pipeline's step meter is
// one. Safe for concurrent use.
type Recorder interface {
	Selected(d time.Duration, elements, missing int)
}

// LowRankKind is the Timing kind of one product of a low-rank compression (PowerSGD's
// P = MQ, Q = MᵀP and M ≈ PQᵀ) over n multiply-adds, as the simulator's selection model
// knows it.
const LowRankKind = "lowrank"

// Timing is how a pipeline times its selections: on its communicator's clock (real, or
// virtual under the simulator, where a selection takes what the model of Kind predicts).
type Timing struct {
	Clock pipeline.Clock
	Kind  string // the selector's name, or ThresholdKind for a plain threshold scan
}

// Start is the time a selection begins.
func (t Timing) Start() time.Time { return t.Clock.Now() }

// Took ends a selection over n elements that began at start and returns how long it took.
func (t Timing) Took(start time.Time, n int) time.Duration { return t.Clock.Work(start, t.Kind, n) }

// Compressor is the compression side of a sparsifying pipeline, in the order GRACE gives
// it: compensate (add the gradient to the error-feedback memory), compress (select about
// k elements of the sum, k from the density schedule at the current step), update the
// memory (clear what was selected, or everything without error feedback), and report the
// selection to the pipeline's meter.
//
// It holds one Selector per goroutine that selects (selectors keep scratch), numbered from
// 0; different goroutines may compress different tensors at once.
type Compressor struct {
	cfg    Config
	mem    *Memory
	sels   []Selector
	timing Timing
	rec    Recorder
	step   func() int
	idx    []int32 // scratch of SelectFused
}

// NewCompressor returns the compressor of a pipeline configured by cfg. sizes gives the
// memory to keep, by tensor id (a negative size: the tensor is never compressed, see
// NewMemory); sels gives the selector of each selecting goroutine (see NewSelector).
// Selections are timed on clock, follow step() for the density schedule and are reported
// to rec.
func NewCompressor(cfg Config, sizes []int, sels []Selector, clock pipeline.Clock, rec Recorder, step func() int) (*Compressor, error) {
	if len(sels) == 0 {
		return nil, fmt.Errorf("compress: a compressor needs at least one selector")
	}
	mem, err := NewMemory(sizes, cfg)
	if err != nil {
		return nil, err
	}
	return &Compressor{cfg: cfg, mem: mem, sels: sels, timing: Timing{Clock: clock, Kind: cfg.Selector}, rec: rec, step: step}, nil
}

// Memory returns the error-feedback memory, which checkpoints read and which a pipeline may
// bind to buffers of its own (Memory.Bind); nil for a nil Compressor, so that a stage not
// planned yet reports no memory.
func (c *Compressor) Memory() *Memory {
	if c == nil {
		return nil
	}
	return c.mem
}

// K is how many of n elements a tensor sends in the current step.
func (c *Compressor) K(n int) int { return KFor(n, c.cfg.DensityAt(c.step())) }

// Compress adds grad to tensor id's memory and selects from the sum into part with
// selector 0: Accumulate, then Select.
func (c *Compressor) Compress(id int, grad []float32, part *SparseTensor) error {
	if err := c.Accumulate(id, grad); err != nil {
		return err
	}
	return c.Select(0, id, part)
}

// Accumulate adds grad to tensor id's memory. It copies grad, so the selection may run
// later and on another goroutine.
func (c *Compressor) Accumulate(id int, grad []float32) error {
	_, err := c.mem.Accumulate(id, grad)
	return err
}

// Select picks K elements of tensor id's accumulated gradient with selector worker into
// part, copies their values, clears them from the memory and reports the selection.
func (c *Compressor) Select(worker, id int, part *SparseTensor) error {
	acc := c.mem.Residual(id)
	if acc == nil {
		return fmt.Errorf("compress: tensor %d has no error-feedback memory", id)
	}
	if r, ok := c.sels[worker].(Reseeder); ok {
		r.Reseed(c.step(), id)
	}
	start := c.timing.Start()
	var err error
	if part.Indices, err = c.sels[worker].Select(acc, c.K(len(acc)), part.Indices); err != nil {
		return fmt.Errorf("selecting from tensor %d: %w", id, err)
	}
	part.ID = id
	part.Values = grow(part.Values, len(part.Indices))
	for j, i := range part.Indices {
		part.Values[j] = acc[i]
	}
	if err := c.mem.Sent(id, part.Indices); err != nil {
		return err
	}
	c.rec.Selected(c.timing.Took(start, len(acc)), len(part.Indices), Missing(len(acc), len(part.Indices)))
	return nil
}

// SelectFused is multi-tensor selection: it picks K elements of fused, the memories of
// tensors ids bound back to back at offsets (see Memory.Bind), by one selection over the
// whole buffer with selector 0, splits the picks by tensor into parts (one per tensor, in
// buffer order), clears them from the memory and reports the selection. A tensor with no
// element above the buffer-wide threshold sends nothing: it goes missing.
func (c *Compressor) SelectFused(fused []float32, ids, offsets []int, parts []SparseTensor) error {
	if r, ok := c.sels[0].(Reseeder); ok && len(ids) > 0 {
		r.Reseed(c.step(), ids[0])
	}
	start := c.timing.Start()
	var err error
	if c.idx, err = c.sels[0].Select(fused, c.K(len(fused)), c.idx); err != nil {
		return fmt.Errorf("selecting from %d fused tensors: %w", len(ids), err)
	}
	// Indices come in ascending order and tensors sit at ascending offsets, so one pass
	// splits them.
	rest, missing := c.idx, 0
	for i, id := range ids {
		lo, n := offsets[i], len(c.mem.Residual(id))
		j := 0
		for j < len(rest) && int(rest[j]) < lo+n {
			j++
		}
		part := &parts[i]
		part.ID = id
		part.Indices, part.Values = part.Indices[:0], part.Values[:0]
		for _, x := range rest[:j] {
			part.Indices = append(part.Indices, x-int32(lo))
			part.Values = append(part.Values, fused[x])
		}
		rest = rest[j:]
		if err := c.mem.Sent(id, part.Indices); err != nil {
			return err
		}
		missing += Missing(n, j)
	}
	c.rec.Selected(c.timing.Took(start, len(fused)), len(c.idx), missing)
	return nil
}
