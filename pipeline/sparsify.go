package pipeline

import (
	"fmt"
	"math"
	"time"

	"github.com/ssfusion/ssfusion/dist"
)

// SparseConfig is what every sparsifying pipeline is configured with.
type SparseConfig struct {
	Density  float64 // fraction of elements to send, in (0, 1]
	Selector string  // selector name, see NewSelector
	Seed     uint64  // seed of randomised selectors
	// Momentum turns on DGC's momentum correction in the error-feedback memory (0: off);
	// the optimizer must then run without momentum.
	Momentum float64
	// WarmupSteps is DGC's warm-up training: over the first WarmupSteps steps the density
	// falls geometrically from WarmupStart (0: 0.25) to Density, so that the early, fast
	// changing gradients are sent less sparsely. 0: no warm-up.
	WarmupSteps int
	WarmupStart float64
}

// DensityAt is the density of step step (0-based).
func (c SparseConfig) DensityAt(step int) float64 {
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
func (c SparseConfig) Check() error {
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
	return nil
}

// KFor is how many of n elements a tensor sends at density: floor(density*n), but at
// least one element of a non-empty tensor, so that no tensor goes missing.
func KFor(n int, density float64) int {
	if n == 0 {
		return 0
	}
	return min(n, max(1, int(math.Floor(density*float64(n)))))
}

// Timing is how a pipeline times its selections: on its communicator's clock (real, or
// virtual under the simulator, where a selection takes what the model of Kind predicts).
type Timing struct {
	Clock dist.Clock
	Kind  string // the selector's name, or "threshold" for a plain threshold scan
}

// Start is the time a selection begins.
func (t Timing) Start() time.Time { return t.Clock.Now() }

// Took ends a selection over n elements that began at start and returns how long it took.
func (t Timing) Took(start time.Time, n int) time.Duration { return t.Clock.Work(start, t.Kind, n) }

// Sparsify selects about k elements of tensor id's accumulated gradient acc (from
// mem.Accumulate) into part, copies their values, and clears them from the memory. It
// reports how long that took.
func Sparsify(tm Timing, sel Selector, mem *Memory, id int, acc []float32, k int, part *SparseTensor) (time.Duration, error) {
	start := tm.Start()
	var err error
	if part.Indices, err = sel.Select(acc, k, part.Indices); err != nil {
		return 0, fmt.Errorf("selecting from tensor %d: %w", id, err)
	}
	part.ID = id
	part.Values = grow(part.Values, len(part.Indices))
	for j, i := range part.Indices {
		part.Values[j] = acc[i]
	}
	if err := mem.Sent(id, part.Indices); err != nil {
		return 0, err
	}
	return tm.Took(start, len(acc)), nil
}

// Missing reports whether a selection of picked elements from a tensor of n leaves it
// missing: a non-empty tensor of which nothing is sent this step.
func Missing(n, picked int) int {
	if n > 0 && picked == 0 {
		return 1
	}
	return 0
}
