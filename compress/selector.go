package compress

import (
	"fmt"
	"math"
	"strings"
)

// A Selector picks the elements of a gradient a sparsifying pipeline sends: about k of
// them, returned as ascending indices in idx[:0] (reallocated only when its capacity is too
// small, so passing the previous result back avoids allocation). A NaN or ±Inf element is a
// *NonFiniteError. Selectors keep scratch buffers between calls and are not safe for
// concurrent use: give each goroutine its own.
type Selector interface {
	Select(g []float32, k int, idx []int32) ([]int32, error)
}

// A Reseeder is a randomised selector whose draws the Compressor ties to the step and the
// tensor before each selection, so that what a step draws does not depend on the calls
// before it: a run resumed from a checkpoint draws what the uninterrupted run drew, and
// selection spread over several goroutines draws the same whichever goroutine runs it.
type Reseeder interface {
	Reseed(step, tensor int)
}

// drawStream is the PCG stream of the draws of one step and tensor: stream mixed with
// both, so that neighbouring steps and tensors get unrelated streams.
func drawStream(stream uint64, step, tensor int) uint64 {
	x := stream ^ (uint64(step)+1)*0x9E3779B97F4A7C15 ^ (uint64(tensor)+1)*0xC2B2AE3D27D4EB4F
	x ^= x >> 31
	return x * 0xBF58476D1CE4E5B9
}

// NonFiniteError reports a NaN or infinite gradient element. Top-k by magnitude has no
// meaning for such a tensor, and sending it would poison every worker's model, so selection
// refuses it and names the first offending position.
type NonFiniteError struct {
	Index int
	Value float32
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("compress: non-finite gradient element %v at index %d", e.Value, e.Index)
}

// magKey is the ordering key of |x|: the IEEE bits of a non-negative float order like
// unsigned integers, so clearing the sign bit lets selection work on integers.
func magKey(x float32) uint32 { return math.Float32bits(x) & 0x7fffffff }

// infKey is the key of +Inf; every key at or above it is Inf or NaN.
const infKey = 0x7f800000

// Finite reports whether v is neither NaN nor infinite.
func Finite(v float32) bool { return magKey(v) < infKey }

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
	return nil, fmt.Errorf("compress: unknown selector %q (available: %s)", name, strings.Join(SelectorNames(), ", "))
}
