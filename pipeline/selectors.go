package pipeline

import (
	"fmt"
	"strings"
)

// SelectorNames returns the names NewSelector lists, sorted: one per selector. The alias
// "sampled" is accepted but not listed, so that flag help, error messages and anything that
// sweeps over the selectors show DGC's selector once.
func SelectorNames() []string { return []string{"dgc", "gaussiank", "randomk", "topk"} }

// NewSelector returns a fresh Selector by name:
//   - "topk", the exact top-k (TopK) and the default, also chosen by the empty name;
//   - "dgc", DGC's sampled threshold with exact refinement (SampledThreshold), at most k
//     elements; "sampled", its name before the others came, stays accepted so that old
//     configurations and checkpoints keep working;
//   - "gaussiank", the Gaussian-k threshold from the mean and standard deviation
//     (GaussianK), at most k elements;
//   - "randomk", k elements uniformly at random (RandomK).
//
// The randomised ones ("dgc", "randomk") are seeded by seed; the others ignore it. Every
// selector returns at most k ascending, unique indices and refuses NaN and ±Inf. Selectors
// keep scratch and are not safe for concurrent use, so every goroutine that selects builds
// its own; building one allocates nothing large, which also makes this the cheap way to
// validate a configured name.
func NewSelector(name string, seed uint64) (Selector, error) {
	switch name {
	case "topk", "":
		return new(TopK), nil
	case "dgc", "sampled":
		return NewSampledThreshold(seed), nil
	case "gaussiank":
		return new(GaussianK), nil
	case "randomk":
		return NewRandomK(seed), nil
	}
	return nil, fmt.Errorf("pipeline: unknown selector %q (available: %s)", name, strings.Join(SelectorNames(), ", "))
}
