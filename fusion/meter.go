package fusion

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/pipeline"
)

// Meter gathers the figures of one step of a pipeline. Selection may run on several
// goroutines, so its counters are atomic. It is a compress.Recorder.
type Meter struct {
	comm   dist.Communicator
	numel  int
	before dist.Stats
	active bool

	sparsify atomic.Int64 // nanoseconds
	sent     atomic.Int64 // elements sent, dense or as pairs
	missing  atomic.Int64

	mu    sync.Mutex
	extra map[string]float64 // see SetExtra
}

// NewMeter returns the meter of a pipeline over tensors.
func NewMeter(comm dist.Communicator, tensors []pipeline.Tensor) *Meter {
	return &Meter{comm: comm, numel: pipeline.TotalNumel(tensors)}
}

// Begin starts measuring a step, once: later calls in the same step do nothing.
func (m *Meter) Begin() {
	if m.active {
		return
	}
	m.active = true
	m.before = m.comm.Stats()
	m.sparsify.Store(0)
	m.sent.Store(0)
	m.missing.Store(0)
	m.mu.Lock()
	m.extra = nil
	m.mu.Unlock()
}

// Reset ends the step without figures, as a failed step does: the next Begin starts
// afresh.
func (m *Meter) Reset() { m.active = false }

// Selected records one selection: how long it took, how many elements it picked, and how
// many tensors it left without any element.
func (m *Meter) Selected(d time.Duration, elements, missing int) {
	m.sparsify.Add(int64(d))
	m.sent.Add(int64(elements))
	m.missing.Add(int64(missing))
}

// SetExtra records a figure particular to the pipeline for this step, under its name in
// pipeline.StepMetrics.Extra: summary.json averages every such figure, and metrics.csv has
// a column for those the trainer knows.
func (m *Meter) SetExtra(name string, v float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.extra == nil {
		m.extra = make(map[string]float64)
	}
	m.extra[name] = v
}

// Dense records elements sent densely.
func (m *Meter) Dense(elements int) { m.sent.Add(int64(elements)) }

// Finish ends the step: wait is how long Wait blocked. A sparsifying pipeline reports its
// density and missing tensors.
func (m *Meter) Finish(wait time.Duration, sparsifying bool) pipeline.StepMetrics {
	m.active = false
	delta := m.comm.Stats().Sub(m.before)
	m.mu.Lock()
	extra := maps.Clone(m.extra)
	m.mu.Unlock()
	s := pipeline.StepMetrics{
		Sparsify:   time.Duration(m.sparsify.Load()),
		Comm:       delta.Busy,
		Wait:       wait,
		BytesSent:  delta.BytesSent,
		DenseBytes: RingAllReduceBytes(m.numel, m.comm.Size()),
		Extra:      extra,
	}
	if sparsifying {
		s.HasDensity = true
		if m.numel > 0 {
			s.DensityAchieved = float64(m.sent.Load()) / float64(m.numel)
		}
		s.TensorsMissing = int(m.missing.Load())
	}
	return s
}

// RingAllReduceBytes is what one rank sends in a ring allreduce of numel float32 values on
// size ranks: 2(P-1)/P of the buffer (reduce-scatter, then allgather).
func RingAllReduceBytes(numel, size int) int64 {
	if size <= 1 {
		return 0
	}
	return int64(2 * (size - 1) * 4 * numel / size)
}
