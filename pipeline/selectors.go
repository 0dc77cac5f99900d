package pipeline

import (
	"fmt"
	"strings"
)

// SelectorNames returns the names NewSelector accepts, sorted.
func SelectorNames() []string { return []string{"sampled", "topk"} }

// NewSelector returns a fresh Selector by name: "topk", the exact top-k and the default
// (also chosen by the empty name), or "sampled", the DGC-style SampledThreshold, whose
// sampling is seeded by seed. Selectors keep scratch and are not safe for concurrent use, so
// every goroutine that selects builds its own; building one allocates nothing large, which
// also makes this the cheap way to validate a configured name.
func NewSelector(name string, seed uint64) (Selector, error) {
	switch name {
	case "topk", "":
		return new(TopK), nil
	case "sampled":
		return NewSampledThreshold(seed), nil
	}
	return nil, fmt.Errorf("pipeline: unknown selector %q (available: %s)", name, strings.Join(SelectorNames(), ", "))
}
