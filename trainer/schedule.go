package trainer

import "math"

// Schedule gives the learning rate of every step: a linear warm-up, then constant, step decay
// at given epochs, or cosine annealing to zero.
type Schedule struct {
	Base          float64
	Kind          string    // const, step or cosine
	WarmupSteps   int       // linear warm-up from Base/WarmupSteps to Base
	Milestones    []float64 // epochs at which step decay multiplies by Gamma
	Gamma         float64
	StepsPerEpoch int
	TotalSteps    int // cosine anneals over this many steps; 0 means constant after warm-up
}

// LR returns the learning rate for step (counted from 0).
func (s Schedule) LR(step int) float64 {
	if step < s.WarmupSteps {
		return s.Base * float64(step+1) / float64(s.WarmupSteps)
	}
	switch s.Kind {
	case "step":
		epoch := float64(step) / float64(max(s.StepsPerEpoch, 1))
		lr := s.Base
		for _, m := range s.Milestones {
			if epoch >= m {
				lr *= s.Gamma
			}
		}
		return lr
	case "cosine":
		span := s.TotalSteps - s.WarmupSteps
		if span <= 0 {
			return s.Base
		}
		t := float64(min(step-s.WarmupSteps, span)) / float64(span)
		return s.Base * 0.5 * (1 + math.Cos(math.Pi*t))
	}
	return s.Base
}
