package compress

import (
	"errors"
	"fmt"
	"math"
)

// Config is what every sparsifying pipeline is configured with.
type Config struct {
	Density  float64 // fraction of elements to send, in (0, 1]
	Selector string  // selector name, see NewSelector
	Seed     uint64  // seed of randomised selectors
	// Momentum turns on DGC's momentum correction in the error-feedback memory (0: off);
	// the optimizer must then run without momentum.
	Momentum float64
	// NoErrorFeedback drops what a step does not send instead of keeping it in the
	// error-feedback memory for later steps (see Memory), as the top-k baselines of the
	// SSFusion authors' code do. It rules out momentum correction, which lives in that
	// memory.
	NoErrorFeedback bool
	// WarmupSteps is DGC's warm-up training: over the first WarmupSteps steps the density
	// falls geometrically from WarmupStart (0: 0.25) to Density, so that the early, fast
	// changing gradients are sent less sparsely. 0: no warm-up.
	WarmupSteps int
	WarmupStart float64
}

// DensityAt is the density of step step (0-based).
func (c Config) DensityAt(step int) float64 {
	if step >= c.WarmupSteps {
		return c.Density
	}
	start := c.WarmupStart
	if start <= 0 {
		start = 0.25
	}
	start = max(start, c.Density)
	f := float64(step) / float64(c.WarmupSteps)
	return math.Exp((1-f)*math.Log(start) + f*math.Log(c.Density))
}

// Check reports a configuration no sparsifying pipeline can run with.
func (c Config) Check() error {
	if !(c.Density > 0 && c.Density <= 1) {
		return fmt.Errorf("density must be in (0, 1], got %g", c.Density)
	}
	if _, err := NewSelector(c.Selector, c.Seed); err != nil {
		return err
	}
	if c.WarmupSteps < 0 || c.WarmupStart < 0 || c.WarmupStart > 1 {
		return fmt.Errorf("density warm-up needs steps >= 0 and a start density in [0, 1], got %d and %g", c.WarmupSteps, c.WarmupStart)
	}
	if c.Momentum < 0 || c.Momentum >= 1 {
		return fmt.Errorf("momentum correction factor must be in [0, 1), got %g", c.Momentum)
	}
	if c.Momentum > 0 && c.NoErrorFeedback {
		return errMomentumNeedsFeedback
	}
	return nil
}

// errMomentumNeedsFeedback refuses momentum correction without error feedback: DGC clears
// the momentum where elements are sent because the rest stays in the residual; dropping
// the rest too would be a variant found neither in DGC nor in the authors' baselines.
var errMomentumNeedsFeedback = errors.New("momentum correction keeps its momentum in the error-feedback memory: it needs error feedback on")

// KFor is how many of n elements a tensor sends at density: floor(density*n), but at
// least one element of a non-empty tensor, so that no tensor goes missing.
func KFor(n int, density float64) int {
	if n == 0 {
		return 0
	}
	return min(n, max(1, int(math.Floor(density*float64(n)))))
}

// Missing reports whether a selection of picked elements from a tensor of n leaves it
// missing: a non-empty tensor of which nothing is sent this step.
func Missing(n, picked int) int {
	if n > 0 && picked == 0 {
		return 1
	}
	return 0
}
