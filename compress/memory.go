package compress

import (
	"fmt"
	"math"
)

// Memory is the error-feedback memory of a sparsifying pipeline: per tensor, the part of
// the gradient that has been produced but not yet sent. Each step's gradient is added to it,
// selection reads the sum, and the sent elements are cleared, so small gradients accumulate
// until they are large enough to be sent instead of being lost.
//
// With DGC's momentum correction (momentum > 0) the memory also keeps a per-tensor momentum
// u: each step u = momentum*u + g, then the accumulator gains u rather than g, and sent
// elements are cleared in both (momentum factor masking). The optimizer must then run
// without momentum of its own, or momentum would be applied twice.
//
// Without error feedback (Config.NoErrorFeedback) the memory holds only the step's
// gradient: Accumulate overwrites instead of adding, and Sent drops every element, sent or
// not, so selection always reads the raw gradient and what it leaves is lost. That is how
// the top-k baselines of the SSFusion authors' code run; a pipeline needs no change of its
// own for it.
//
// Every accumulator is allocated up front, so different goroutines may work on different
// tensors at once; one tensor must not be used by two goroutines at a time.
type Memory struct {
	momentum float32
	drop     bool        // no error feedback: nothing outlives the step
	acc      [][]float32 // by tensor id; nil for tensors without memory
	mom      [][]float32 // by tensor id, only with momentum correction
}

// NewMemory returns the memory cfg asks for (momentum correction at cfg.Momentum, in
// [0, 1), when above 0; error feedback unless cfg.NoErrorFeedback) for tensors whose sizes
// are numel (by tensor id; a negative size means the tensor is never sparsified and gets
// no memory).
func NewMemory(numel []int, cfg Config) (*Memory, error) {
	momentum := cfg.Momentum
	if momentum < 0 || momentum >= 1 || math.IsNaN(momentum) {
		return nil, fmt.Errorf("compress: momentum correction factor must be in [0, 1), got %g", momentum)
	}
	if momentum > 0 && cfg.NoErrorFeedback {
		return nil, errMomentumNeedsFeedback
	}
	m := &Memory{momentum: float32(momentum), drop: cfg.NoErrorFeedback, acc: make([][]float32, len(numel))}
	if momentum > 0 {
		m.mom = make([][]float32, len(numel))
	}
	for id, n := range numel {
		if n < 0 {
			continue
		}
		m.acc[id] = make([]float32, n)
		if m.mom != nil {
			m.mom[id] = make([]float32, n)
		}
	}
	return m, nil
}

// Bind makes storage the accumulator of tensor id, so that a pipeline can keep the
// accumulators of a fusion buffer's tensors inside the buffer itself and select over them in
// place. storage is zeroed: binding starts the tensor's memory afresh.
func (m *Memory) Bind(id int, storage []float32) error {
	if err := m.check(id, len(storage)); err != nil {
		return err
	}
	clear(storage)
	m.acc[id] = storage
	return nil
}

// Accumulate adds gradient g of tensor id into its memory and returns the accumulator:
// the values to select from. Read the selected values from it before calling Sent.
// Without error feedback the accumulator becomes a copy of g.
func (m *Memory) Accumulate(id int, g []float32) ([]float32, error) {
	if err := m.check(id, len(g)); err != nil {
		return nil, err
	}
	acc := m.acc[id]
	if m.drop {
		// Overwriting rather than adding to the zeros Sent left also keeps a step that
		// failed before Sent from leaking its gradient into the next.
		copy(acc, g)
		return acc, nil
	}
	if m.mom == nil {
		for i, v := range g {
			acc[i] += v
		}
		return acc, nil
	}
	u, mu := m.mom[id], m.momentum
	for i, v := range g {
		u[i] = mu*u[i] + v
		acc[i] += u[i]
	}
	return acc, nil
}

// Momentum applies momentum correction to a tensor that is sent whole, not sparsified: it
// returns u = momentum*u + g, to be sent in place of g, and keeps u for the next step.
// Nothing is held back, since every element goes out; summing u across workers gives the
// momentum of the summed gradients, which is what the optimizer's own momentum, turned off
// under momentum correction, would have applied. Without momentum correction it returns g.
func (m *Memory) Momentum(id int, g []float32) ([]float32, error) {
	if m.mom == nil {
		return g, nil
	}
	if err := m.check(id, len(g)); err != nil {
		return nil, err
	}
	u, mu := m.mom[id], m.momentum
	for i, v := range g {
		u[i] = mu*u[i] + v
	}
	return u, nil
}

// Sent clears the elements at idx of tensor id's memory: they have been transmitted.
// Without error feedback it clears every element: what was not sent is dropped. All
// indices are checked first, so on error the memory is unchanged.
func (m *Memory) Sent(id int, idx []int32) error {
	if err := m.check(id, -1); err != nil {
		return err
	}
	acc := m.acc[id]
	for _, i := range idx {
		if i < 0 || int(i) >= len(acc) {
			return fmt.Errorf("compress: memory of tensor %d: sent index %d out of range [0, %d)", id, i, len(acc))
		}
	}
	if m.drop {
		clear(acc)
		return nil
	}
	for _, i := range idx {
		acc[i] = 0
	}
	if m.mom != nil {
		u := m.mom[id]
		for _, i := range idx {
			u[i] = 0
		}
	}
	return nil
}

// Residual returns what tensor id holds back: its accumulator between steps. The slice is
// the stored one, for inspection and checkpoints; nil for a tensor without memory.
func (m *Memory) Residual(id int) []float32 {
	if id < 0 || id >= len(m.acc) {
		return nil
	}
	return m.acc[id]
}

// check reports whether tensor id has memory of n elements (n < 0: any size).
func (m *Memory) check(id, n int) error {
	if id < 0 || id >= len(m.acc) || m.acc[id] == nil {
		return fmt.Errorf("compress: tensor %d has no error-feedback memory", id)
	}
	if n >= 0 && n != len(m.acc[id]) {
		return fmt.Errorf("compress: memory of tensor %d has %d elements, gradient has %d", id, len(m.acc[id]), n)
	}
	return nil
}

// Export returns a copy of the memory: the residuals by tensor id, and the momenta when
// momentum correction is on (nil otherwise). A tensor without memory has nil entries.
func (m *Memory) Export() (residuals, momenta [][]float32) {
	residuals = cloneAll(m.acc)
	if m.mom != nil {
		momenta = cloneAll(m.mom)
	}
	return residuals, momenta
}

// Restore copies residuals and momenta (as Export returns them) in, after checking that
// they fit this memory; on error nothing is changed.
func (m *Memory) Restore(residuals, momenta [][]float32) error {
	if err := fits("residual", m.acc, residuals); err != nil {
		return err
	}
	if (m.mom == nil) != (momenta == nil) {
		return fmt.Errorf("restoring state: momentum correction was %s when the state was saved and is %s now",
			onOff(momenta != nil), onOff(m.mom != nil))
	}
	if m.mom != nil {
		if err := fits("momentum", m.mom, momenta); err != nil {
			return err
		}
	}
	for id, r := range residuals {
		copy(m.acc[id], r)
	}
	for id, u := range momenta {
		copy(m.mom[id], u)
	}
	return nil
}

func fits(what string, have, got [][]float32) error {
	if len(got) != len(have) {
		return fmt.Errorf("restoring state: %s memory for %d tensors, the pipeline has %d", what, len(got), len(have))
	}
	for id := range have {
		if len(got[id]) != len(have[id]) {
			return fmt.Errorf("restoring state: %s memory of tensor %d has %d elements, the pipeline's has %d", what, id, len(got[id]), len(have[id]))
		}
	}
	return nil
}

func cloneAll(vs [][]float32) [][]float32 {
	out := make([][]float32, len(vs))
	for i, v := range vs {
		if v != nil {
			out[i] = append([]float32(nil), v...)
		}
	}
	return out
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}
