package nets

import (
	"fmt"

	G "gorgonia.org/gorgonia"
)

// vggConfig returns the standard VGG layer list; 0 stands for a 2×2 max pool ('M').
func vggConfig(name string) ([]int, bool) {
	switch name {
	case "vgg11":
		return []int{64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0}, true
	case "vgg13":
		return []int{64, 64, 0, 128, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0}, true
	case "vgg16":
		return []int{64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0}, true
	case "vgg19":
		return []int{64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0, 512, 512, 512, 512, 0}, true
	}
	return nil, false
}

// buildVGG is VGG with BatchNorm for CIFAR: features of 3×3 convolutions (with bias) each followed
// by BatchNorm and ReLU, max pools, then one linear layer "classifier" on the flattened features
// (512·WidthMult inputs for 32×32 and 28×28 images). Parameter names follow PyTorch's Sequential
// numbering (features.0 conv, features.1 BatchNorm, features.2 ReLU, ...).
//
// A max pool is skipped (stays an identity) once the feature map is smaller than 2×2, so that odd
// inputs work: 28×28 (MNIST) goes 28→14→7→3→1→1, where PyTorch would fail on the last pool.
func buildVGG(b *builder, x *G.Node, s *Spec) *G.Node {
	cfg, ok := vggConfig(s.Arch)
	if !ok {
		b.fail(fmt.Errorf("no VGG configuration %q", s.Arch))
		return nil
	}
	i := 0
	for _, c := range cfg {
		if b.err != nil {
			return nil
		}
		if c == 0 {
			if sh := x.Shape(); sh[2] >= 2 && sh[3] >= 2 {
				x = b.maxPool(x)
			}
			i++
			continue
		}
		x = b.conv(x, fmt.Sprintf("features.%d", i), s.channels(c), 3, 1, 1, true)
		x = b.batchNormReLU(x, fmt.Sprintf("features.%d", i+1))
		i += 3
	}
	return b.linear(b.flatten(x), "classifier", s.Classes, true)
}
