package pipelines

import "testing"

// TestSparseCarriesErrorFeedback: --error-feedback reaches every sparsifying pipeline
// through the one compress.Config they are all built from, and momentum correction takes
// the optimizer's momentum.
func TestSparseCarriesErrorFeedback(t *testing.T) {
	for _, on := range []bool{true, false} {
		s := DefaultSettings()
		s.ErrorFeedback = on
		if got := (Build{Settings: s}).Sparse().NoErrorFeedback; got == on {
			t.Errorf("error-feedback %v: compress.Config.NoErrorFeedback %v", on, got)
		}
	}
	s := DefaultSettings()
	s.MomentumCorrection = true
	if got := (Build{Settings: s, Momentum: 0.9}).Sparse().Momentum; got != 0.9 {
		t.Errorf("momentum correction: compress.Config.Momentum %g, want the optimizer's 0.9", got)
	}
	if got := (Build{Settings: DefaultSettings(), Momentum: 0.9}).Sparse().Momentum; got != 0 {
		t.Errorf("without momentum correction: compress.Config.Momentum %g, want 0", got)
	}
}
