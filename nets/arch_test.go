package nets

import (
	"slices"
	"testing"
)

// TestArchitecturesMatchPyTorch checks parameter and tensor counts against the PyTorch models
// they reproduce, with CIFAR-10 heads. CIFAR ResNets with option-B shortcuts: ResNet-20 has
// 432+32 (stem) + 14016 + 51648 + 205696 (stages) + 650 (fc) = 272474 parameters, and each
// further block per stage adds 4672+18560+73984 = 97216. ResNet-18 and VGG are the common
// pytorch-cifar models.
func TestArchitecturesMatchPyTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds full-size models")
	}
	for _, tc := range []struct {
		arch            string
		params, tensors int
	}{
		{"resnet20", 272474, 65},
		{"resnet56", 272474 + 6*97216, 173},
		{"resnet18", 11173962, 62},
		{"vgg11", 9231114, 34},
		{"vgg16", 14728266, 54},
	} {
		n := mustNew(t, Spec{Arch: tc.arch, BatchSize: 2, Channels: 3, Height: 32, Width: 32, Classes: 10})
		total := 0
		for _, p := range n.params {
			total += p.Numel()
		}
		if total != tc.params || len(n.params) != tc.tensors {
			t.Errorf("%s: %d parameters in %d tensors, want %d in %d", tc.arch, total, len(n.params), tc.params, tc.tensors)
		}
	}
}

// TestMNISTShapedInputs trains and evaluates ResNet and VGG on 1×28×28: VGG's pools go
// 28→14→7→3→1 and then stay at 1×1, so its classifier sees 512·WidthMult features.
func TestMNISTShapedInputs(t *testing.T) {
	for _, s := range []Spec{
		{Arch: "resnet20", BatchSize: 3, Channels: 1, Height: 28, Width: 28, Classes: 10, WidthMult: 0.25},
		{Arch: "resnet18", BatchSize: 2, Channels: 1, Height: 28, Width: 28, Classes: 10, WidthMult: 0.125},
		{Arch: "vgg16", BatchSize: 2, Channels: 1, Height: 28, Width: 28, Classes: 10, WidthMult: 0.125},
	} {
		n := mustNew(t, s)
		b := randBatch(s, s.BatchSize, 1)
		mustTrain(t, n, b)
		mustEval(t, n, b)
		last := n.params[len(n.params)-2]
		if want := []int{10, s.channels(map[string]int{"resnet20": 64, "resnet18": 512, "vgg16": 512}[s.Arch])}; !slices.Equal(last.Shape, want) {
			t.Errorf("%s: %s has shape %v, want %v", s.Arch, last.Name, last.Shape, want)
		}
	}
}

func TestArchsAllBuild(t *testing.T) {
	for _, a := range Archs() {
		s := Spec{Arch: a, BatchSize: 2, Channels: 3, Height: 8, Width: 8, Classes: 3, WidthMult: 0.0625,
			Vocab: 7, SeqLen: 2, HSize: 3, Layers: 1}
		if testing.Short() && a == "resnet110" {
			continue
		}
		n := mustNew(t, s)
		if n.Name() != a {
			t.Errorf("Name() = %q, want %q", n.Name(), a)
		}
		mustTrain(t, n, randBatch(s, 2, 1))
	}
}
