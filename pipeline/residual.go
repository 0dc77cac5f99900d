package pipeline

import "fmt"

// Residual is the error-feedback memory of top-k sparsification: what a step selected but
// did not send is kept per tensor and added to the next step's gradient, so small gradients
// accumulate until they are large enough to be sent rather than being lost.
//
// The zero value is ready to use. A tensor's residual is created by its first Keep and its
// length is fixed from then on. Residual is not safe for concurrent use on the same id.
type Residual struct {
	r [][]float32 // by tensor id; nil until the first Keep
}

// Add adds the residual stored for tensor id into g in place (g += r). A tensor with no
// residual yet leaves g unchanged.
func (m *Residual) Add(id int, g []float32) error {
	if id < 0 {
		return fmt.Errorf("pipeline: residual of tensor %d: negative id", id)
	}
	if id >= len(m.r) || m.r[id] == nil {
		return nil
	}
	r := m.r[id]
	if len(r) != len(g) {
		return fmt.Errorf("pipeline: residual of tensor %d has %d elements, gradient has %d", id, len(r), len(g))
	}
	for i, v := range r {
		g[i] += v
	}
	return nil
}

// Keep stores g, with the elements at the sent indices zeroed, as the new residual of
// tensor id. g itself is not modified, because the caller still reads the sent values from
// it. On error the stored residual is unchanged.
func (m *Residual) Keep(id int, g []float32, sent []int32) error {
	if id < 0 {
		return fmt.Errorf("pipeline: residual of tensor %d: negative id", id)
	}
	for _, i := range sent {
		if i < 0 || int(i) >= len(g) {
			return fmt.Errorf("pipeline: residual of tensor %d: sent index %d out of range [0, %d)", id, i, len(g))
		}
	}
	if id >= len(m.r) {
		m.r = append(m.r, make([][]float32, id+1-len(m.r))...)
	}
	r := m.r[id]
	switch {
	case r == nil:
		r = make([]float32, len(g))
		m.r[id] = r
	case len(r) != len(g):
		return fmt.Errorf("pipeline: residual of tensor %d has %d elements, gradient has %d", id, len(r), len(g))
	}
	copy(r, g)
	for _, i := range sent {
		r[i] = 0
	}
	return nil
}

// Get returns the residual stored for tensor id, or nil if it has none. The slice is the
// stored one: it is for inspection (norms, checkpoints) and changes with the next Keep.
func (m *Residual) Get(id int) []float32 {
	if id < 0 || id >= len(m.r) {
		return nil
	}
	return m.r[id]
}

// Reset drops every stored residual, as when training restarts from a checkpoint without
// one.
func (m *Residual) Reset() { m.r = nil }
