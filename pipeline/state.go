package pipeline

import "fmt"

// State is what a pipeline carries from one step to the next, which a checkpoint must keep
// for a resumed run to continue exactly as an uninterrupted one: the step count (behind
// density warm-up) and each tensor's error-feedback memory. It belongs to one rank: every
// rank's residuals differ.
type State struct {
	Steps     int64
	Order     []int       // the backprop order the ranks agreed on; nil before the first step
	Residuals [][]float32 // by tensor id; nil for a tensor without memory
	Momenta   [][]float32 // by tensor id, with DGC momentum correction only
	// Extra is the state of a stage that keeps more than error-feedback memory between
	// steps (ExDyna: its threshold and partition boundaries), encoded by the stage; nil for
	// the others.
	Extra []byte
}

// Stateful is a Pipeline whose state outlives a step. Pipelines that are not Stateful (the
// dense ones) start every step afresh.
type Stateful interface {
	// State returns a copy of the pipeline's state between steps.
	State() (State, error)
	// Restore replaces the state of a pipeline that has not yet run a step.
	Restore(State) error
}

// memoryOwner is a Stage with error-feedback memory, nil until the stage is planned.
type memoryOwner interface{ Memory() *Memory }

// extraOwner is a Stage that carries state of its own from one step to the next, beyond its
// memory, which a resumed run needs to continue bit for bit. The stage encodes it; Fusion
// only stores it in State.Extra. The state must not depend on the fusion plan: RestoreExtra
// is called before the plan exists.
type extraOwner interface {
	// ExtraState returns the encoded state between steps, a copy the caller owns.
	ExtraState() []byte
	// RestoreExtra replaces the state by one ExtraState returned; on error nothing changes.
	RestoreExtra([]byte) error
}

// State implements Stateful.
func (f *Fusion) State() (State, error) {
	if f.broken != nil {
		return State{}, f.broken
	}
	st := State{Steps: f.steps.Load(), Order: append([]int(nil), f.step.Order()...)}
	if st.Order == nil && f.restored != nil {
		st.Order = f.restored.Order
	}
	if xo, ok := f.stage.(extraOwner); ok {
		st.Extra = xo.ExtraState()
	}
	if owner, ok := f.stage.(memoryOwner); ok && owner.Memory() != nil {
		st.Residuals, st.Momenta = owner.Memory().export()
	} else if f.restored != nil {
		// Not planned yet: what was restored is still the state.
		st.Residuals, st.Momenta = f.restored.Residuals, f.restored.Momenta
	}
	return st, nil
}

// Restore implements Stateful. The stage creates its memory with the fusion plan, which the
// saved backprop order rebuilds at once; a state without an order (taken before the first
// step ended) keeps the residuals until the plan exists.
func (f *Fusion) Restore(st State) error {
	if f.steps.Load() != 0 || f.ctl != nil {
		return fmt.Errorf("pipeline: restoring state into a pipeline that has already run")
	}
	if st.Steps < 0 {
		return fmt.Errorf("pipeline: restoring state with a negative step count %d", st.Steps)
	}
	if _, ok := f.stage.(memoryOwner); !ok && (st.Residuals != nil || st.Momenta != nil) {
		return fmt.Errorf("pipeline: this pipeline keeps no error-feedback memory, the state holds some")
	}
	// The stage's own state goes in before anything else changes: the stage checks it
	// whole, so a state that does not fit it is refused with the pipeline untouched.
	if xo, ok := f.stage.(extraOwner); ok {
		if err := xo.RestoreExtra(st.Extra); err != nil {
			return fmt.Errorf("pipeline: restoring state: %w", err)
		}
	} else if st.Extra != nil {
		return fmt.Errorf("pipeline: this pipeline keeps no state of its own beyond memory, the state holds %d bytes of it", len(st.Extra))
	}
	f.steps.Store(st.Steps)
	f.restored = &st
	if st.Order == nil {
		return nil // the plan, and with it the residuals, come at the end of the first step
	}
	if err := f.step.Adopt(st.Order); err != nil {
		return fmt.Errorf("pipeline: restoring state: %w", err)
	}
	return f.plan()
}

// applyRestored moves restored residuals into the memory the stage has just planned.
func (f *Fusion) applyRestored() error {
	if f.restored == nil {
		return nil
	}
	st := f.restored
	f.restored = nil
	owner, ok := f.stage.(memoryOwner)
	if !ok || owner.Memory() == nil {
		if st.Residuals != nil {
			return fmt.Errorf("restoring state: the pipeline planned no error-feedback memory")
		}
		return nil
	}
	return owner.Memory().restore(st.Residuals, st.Momenta)
}

// export copies the memory out.
func (m *Memory) export() (residuals, momenta [][]float32) {
	residuals = cloneAll(m.acc)
	if m.mom != nil {
		momenta = cloneAll(m.mom)
	}
	return residuals, momenta
}

// restore copies residuals and momenta in, after checking that they fit this memory; on
// error nothing is changed.
func (m *Memory) restore(residuals, momenta [][]float32) error {
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
