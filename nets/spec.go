package nets

import (
	"errors"
	"fmt"
	"math"
	"strings"

	G "gorgonia.org/gorgonia"
)

// family tells image classifiers from language models.
type family int

const (
	imageFamily family = iota
	lmFamily
)

// arch describes one architecture name.
type arch struct {
	family  family
	minSize int                                          // smallest input height and width (image models)
	build   func(b *builder, x *G.Node, s *Spec) *G.Node // image models: logits of input x
}

// archNames lists the architectures in the order Archs reports them.
var archNames = []string{
	"mlp",
	"resnet8", "resnet20", "resnet32", "resnet44", "resnet56", "resnet110",
	"resnet18",
	"vgg11", "vgg13", "vgg16", "vgg19",
	"lstm",
}

// Archs returns the architecture names New accepts.
func Archs() []string { return append([]string(nil), archNames...) }

// lookupArch returns the description of an architecture name.
func lookupArch(name string) (arch, bool) {
	switch name {
	case "mlp":
		return arch{family: imageFamily, minSize: 1, build: buildMLP}, true
	case "resnet8", "resnet20", "resnet32", "resnet44", "resnet56", "resnet110":
		// Two stride-2 stages: 4 is the smallest input that each of them halves.
		return arch{family: imageFamily, minSize: 4, build: buildCIFARResNet}, true
	case "resnet18":
		return arch{family: imageFamily, minSize: 8, build: buildResNet18}, true
	case "vgg11", "vgg13", "vgg16", "vgg19":
		return arch{family: imageFamily, minSize: 2, build: buildVGG}, true
	case "lstm":
		return arch{family: lmFamily}, true
	}
	return arch{}, false
}

// defaultHidden is the MLP's hidden layer sizes when Spec.Hidden is nil.
var defaultHidden = []int{128}

// normalize validates s and fills its defaults.
func (s Spec) normalize() (Spec, arch, error) {
	a, ok := lookupArch(s.Arch)
	if !ok {
		return s, a, fmt.Errorf("unknown architecture %q (valid: %s)", s.Arch, strings.Join(archNames, ", "))
	}
	if s.BatchSize <= 0 {
		return s, a, fmt.Errorf("batch size must be positive, got %d", s.BatchSize)
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch a.family {
	case imageFamily:
		if s.Channels <= 0 || s.Height <= 0 || s.Width <= 0 {
			bad("input shape %dx%dx%d must be positive", s.Channels, s.Height, s.Width)
		} else if s.Height < a.minSize || s.Width < a.minSize {
			bad("input %dx%d is too small for %s (needs at least %dx%d)", s.Height, s.Width, s.Arch, a.minSize, a.minSize)
		}
		if s.Classes < 2 {
			bad("need at least 2 classes, got %d", s.Classes)
		}
		switch {
		case math.IsNaN(s.WidthMult) || math.IsInf(s.WidthMult, 0) || s.WidthMult < 0:
			bad("width multiplier must be a positive number, got %v", s.WidthMult)
		case s.WidthMult == 0:
			s.WidthMult = 1
		}
		if s.Arch == "mlp" {
			if s.Hidden == nil {
				s.Hidden = defaultHidden
			}
			s.Hidden = append([]int(nil), s.Hidden...)
			for i, h := range s.Hidden {
				if h <= 0 {
					bad("hidden layer %d has size %d", i, h)
				}
			}
		}
	case lmFamily:
		if s.Vocab < 2 {
			bad("vocabulary must have at least 2 words, got %d", s.Vocab)
		}
		if s.SeqLen <= 0 {
			bad("sequence length must be positive, got %d", s.SeqLen)
		}
		if s.HSize <= 0 {
			bad("hidden size must be positive, got %d", s.HSize)
		}
		if s.Layers <= 0 {
			bad("number of layers must be positive, got %d", s.Layers)
		}
		switch {
		case s.Embed < 0:
			bad("embedding size must not be negative, got %d", s.Embed)
		case s.Embed == 0:
			s.Embed = s.HSize
		}
		if !(s.Dropout >= 0 && s.Dropout < 1) {
			bad("dropout must be in [0, 1), got %v", s.Dropout)
		}
	}
	return s, a, errors.Join(errs...)
}

// channels applies the width multiplier to a channel count.
func (s *Spec) channels(c int) int {
	return max(1, int(math.Round(float64(c)*s.WidthMult)))
}
