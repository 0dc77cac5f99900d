package fusion

import (
	"fmt"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/pipeline"
)

// memoryOwner is a Stage with error-feedback memory, nil until the stage is planned.
type memoryOwner interface{ Memory() *compress.Memory }

// ExtraStater is a Stage that keeps state of its own between steps beyond error-feedback
// memory (PowerSGD: its warm-started factors), which checkpoints carry in
// pipeline.State.Extra.
type ExtraStater interface {
	// ExtraState encodes the state; nil before the stage is planned.
	ExtraState() ([]byte, error)
	// RestoreExtra adopts an encoded state; it is called after Plan.
	RestoreExtra([]byte) error
}

// State implements pipeline.Stateful.
func (f *Fusion) State() (pipeline.State, error) {
	if f.broken != nil {
		return pipeline.State{}, f.broken
	}
	st := pipeline.State{Steps: f.steps.Load(), Order: append([]int(nil), f.step.Order()...)}
	if st.Order == nil && f.restored != nil {
		st.Order = f.restored.Order
	}
	if owner, ok := f.stage.(memoryOwner); ok && owner.Memory() != nil {
		st.Residuals, st.Momenta = owner.Memory().Export()
	} else if f.restored != nil {
		// Not planned yet: what was restored is still the state.
		st.Residuals, st.Momenta = f.restored.Residuals, f.restored.Momenta
	}
	if x, ok := f.stage.(ExtraStater); ok {
		extra, err := x.ExtraState()
		if err != nil {
			return pipeline.State{}, err
		}
		st.Extra = extra
		if st.Extra == nil && f.restored != nil {
			st.Extra = f.restored.Extra
		}
	}
	return st, nil
}

// Restore implements pipeline.Stateful. The stage creates its memory with the fusion plan,
// which the saved backprop order rebuilds at once; a state without an order (taken before
// the first step ended) keeps the residuals until the plan exists.
func (f *Fusion) Restore(st pipeline.State) error {
	if f.steps.Load() != 0 || f.ctl != nil {
		return fmt.Errorf("pipeline: restoring state into a pipeline that has already run")
	}
	if st.Steps < 0 {
		return fmt.Errorf("pipeline: restoring state with a negative step count %d", st.Steps)
	}
	if _, ok := f.stage.(memoryOwner); !ok && (st.Residuals != nil || st.Momenta != nil) {
		return fmt.Errorf("pipeline: this pipeline keeps no error-feedback memory, the state holds some")
	}
	if _, ok := f.stage.(ExtraStater); !ok && st.Extra != nil {
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
	if x, ok := f.stage.(ExtraStater); ok && st.Extra != nil {
		if err := x.RestoreExtra(st.Extra); err != nil {
			return fmt.Errorf("restoring state: %w", err)
		}
	}
	owner, ok := f.stage.(memoryOwner)
	if !ok || owner.Memory() == nil {
		if st.Residuals != nil {
			return fmt.Errorf("restoring state: the pipeline planned no error-feedback memory")
		}
		return nil
	}
	return owner.Memory().Restore(st.Residuals, st.Momenta)
}
