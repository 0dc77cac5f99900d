package profile

import (
	"errors"
	"fmt"
	"math"
)

// Layer is one parameter tensor of an architecture, listed in forward order.
//
// ForwardFLOPs is the forward cost per sample attributed to the tensor: for a convolution
// or linear weight, 2 x the layer's multiply-accumulates; for a bias or a normalisation
// weight, the elementwise cost of that op, which is small; for an embedding, a small
// lookup cost.
//
// Work that has no parameter tensor of its own (the attention score and softmax matmuls of
// a transformer, a language-model head tied to the embedding) is added to the last
// parameter tensor before it in forward order. Backprop runs that work's gradient just
// before that tensor's gradient, so it is exactly the time that delays the tensor's
// readiness: for attention, the value (or fused QKV) projection's bias.
//
// Dims is the number of dimensions of the tensor as the framework stores it (4 for a
// convolution kernel, 2 for a linear weight or an embedding, 1 for a bias or a norm's
// scale); 0 when unknown. Shape is the tensor's shape as the framework stores it; nil when
// unknown.
type Layer struct {
	Name         string
	Numel        int
	ForwardFLOPs float64
	Dims         int
	Shape        []int
}

// Backward costs about twice forward: each weighted layer computes both the gradient of
// its input and the gradient of its weight, each as costly as the forward product.
const (
	forwardShare  = 1.0 / 3
	backwardShare = 2.0 / 3
)

// FromFLOPs builds a profile from an architecture and a stated iteration time, both in
// milliseconds: the compute left after the optimizer update is split one third to forward
// and two thirds to backward, and each tensor's backward_ms is its share of the FLOPs. The
// tensors come out in backprop order, the reverse of arch's forward order.
//
// The split is only as good as FLOPs are a proxy for time: memory-bound elementwise ops
// (activations, normalisation, softmax) take longer than their FLOPs suggest, so the
// tensors next to them get a little too little time and the big matmuls a little too
// much.
func FromFLOPs(model, source string, batch int, arch []Layer, iterationMS, updateMS float64) (*Profile, error) {
	if err := checkTimes(iterationMS, updateMS); err != nil {
		return nil, fmt.Errorf("profile of %s: %w", model, err)
	}
	total, err := checkArch(arch)
	if err != nil {
		return nil, fmt.Errorf("profile of %s: %w", model, err)
	}
	compute := iterationMS - updateMS
	backward := backwardShare * compute
	p := &Profile{
		Model:     model,
		Source:    source,
		BatchSize: batch,
		ForwardMS: forwardShare * compute,
		Tensors:   make([]Tensor, len(arch)),
		UpdateMS:  updateMS,
	}
	for i, l := range arch {
		p.Tensors[len(arch)-1-i] = Tensor{Name: l.Name, Numel: l.Numel, Dims: l.Dims, Shape: l.Shape, BackwardMS: backward * l.ForwardFLOPs / total}
	}
	// Check catches what the arguments above do not (an empty model name, a batch <= 0).
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("profile of %s: %w", model, err)
	}
	return p, nil
}

func checkTimes(iterationMS, updateMS float64) error {
	switch {
	case !(iterationMS > 0) || math.IsInf(iterationMS, 0):
		return fmt.Errorf("iteration time must be positive and finite, got %g ms", iterationMS)
	case !validTime(updateMS):
		return fmt.Errorf("update time must be a finite time >= 0, got %g ms", updateMS)
	case updateMS >= iterationMS:
		return fmt.Errorf("update time %g ms leaves no compute in an iteration of %g ms", updateMS, iterationMS)
	}
	return nil
}

// checkArch reports what makes arch unusable, and otherwise returns its total FLOPs.
func checkArch(arch []Layer) (float64, error) {
	if len(arch) == 0 {
		return 0, errors.New("architecture has no tensors")
	}
	seen := make(map[string]bool, len(arch))
	total := 0.0
	for i, l := range arch {
		switch {
		case l.Name == "":
			return 0, fmt.Errorf("layer %d has no name", i)
		case seen[l.Name]:
			return 0, fmt.Errorf("layer %d: name %q appears twice", i, l.Name)
		case l.Numel <= 0:
			return 0, fmt.Errorf("layer %d (%s): numel must be positive, got %d", i, l.Name, l.Numel)
		case !(l.ForwardFLOPs >= 0) || math.IsInf(l.ForwardFLOPs, 0):
			return 0, fmt.Errorf("layer %d (%s): forward FLOPs must be finite and >= 0, got %g", i, l.Name, l.ForwardFLOPs)
		}
		seen[l.Name] = true
		total += l.ForwardFLOPs
	}
	if !(total > 0) || math.IsInf(total, 0) {
		return 0, fmt.Errorf("architecture's forward FLOPs must sum to a positive finite number, got %g", total)
	}
	return total, nil
}

// ArchFLOPs is the forward FLOPs per sample of an architecture.
func ArchFLOPs(arch []Layer) float64 {
	total := 0.0
	for _, l := range arch {
		total += l.ForwardFLOPs
	}
	return total
}

// ArchParams is the number of parameters of an architecture.
func ArchParams(arch []Layer) int {
	n := 0
	for _, l := range arch {
		n += l.Numel
	}
	return n
}
