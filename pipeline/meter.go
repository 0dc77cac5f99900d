package pipeline

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/ssfusion/ssfusion/dist"
)

// Meter gathers the figures of one step of a pipeline. Selection may run on several
// goroutines, so its counters are atomic.
type Meter struct {
	comm   dist.Communicator
	numel  int
	before dist.Stats
	active bool

	sparsify atomic.Int64 // nanoseconds
	sent     atomic.Int64 // elements sent, dense or as pairs
	missing  atomic.Int64
	imbal    atomic.Uint64 // float64 bits of the step's partition imbalance, see SetImbalance
}

// NewMeter returns the meter of a pipeline over tensors.
func NewMeter(comm dist.Communicator, tensors []Tensor) *Meter {
	return &Meter{comm: comm, numel: TotalNumel(tensors)}
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
	m.imbal.Store(0)
}

// Selected records one selection: how long it took, how many elements it picked, and how
// many tensors it left without any element.
func (m *Meter) Selected(d time.Duration, elements, missing int) {
	m.sparsify.Add(int64(d))
	m.sent.Add(int64(elements))
	m.missing.Add(int64(missing))
}

// SetImbalance records the step's load imbalance between partitions (ExDyna): the largest
// partition's selected count over the mean. Steps that never set it report 0.
func (m *Meter) SetImbalance(v float64) { m.imbal.Store(math.Float64bits(v)) }

// Dense records elements sent densely.
func (m *Meter) Dense(elements int) { m.sent.Add(int64(elements)) }

// Finish ends the step: wait is how long Wait blocked. A sparsifying pipeline reports its
// density and missing tensors.
func (m *Meter) Finish(wait time.Duration, sparsifying bool) StepMetrics {
	m.active = false
	delta := m.comm.Stats().Sub(m.before)
	s := StepMetrics{
		Sparsify:   time.Duration(m.sparsify.Load()),
		Comm:       delta.CommTime(),
		Wait:       wait,
		BytesSent:  delta.BytesSent,
		DenseBytes: RingAllReduceBytes(m.numel, m.comm.Size()),
		Imbalance:  math.Float64frombits(m.imbal.Load()),
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
