package nets

import (
	"fmt"
	"strconv"
	"strings"

	G "gorgonia.org/gorgonia"
)

// basicBlock is ResNet's two-convolution block. When the shape changes the shortcut is a 1×1
// convolution with BatchNorm (option B), named shortcut.0 and shortcut.1 as in the common
// PyTorch CIFAR code.
func basicBlock(b *builder, x *G.Node, name string, out, stride int) *G.Node {
	if b.err != nil {
		return nil
	}
	in := x.Shape()[1]
	y := b.batchNormReLU(b.conv(x, name+".conv1", out, 3, stride, 1, false), name+".bn1")
	y = b.batchNorm(b.conv(y, name+".conv2", out, 3, 1, 1, false), name+".bn2")
	short := x
	if stride != 1 || in != out {
		short = b.batchNorm(b.conv(x, name+".shortcut.0", out, 1, stride, 0, false), name+".shortcut.1")
	}
	return b.addReLU(y, short)
}

// resNet is the shared body: a 3×3 stem (stride 1, no max pool: the CIFAR stem), stages of basic
// blocks whose first block has the stage's stride, global average pooling and a linear layer.
func resNet(b *builder, x *G.Node, s *Spec, stem int, widths, blocks, strides []int) *G.Node {
	x = b.batchNormReLU(b.conv(x, "conv1", s.channels(stem), 3, 1, 1, false), "bn1")
	for i, w := range widths {
		for j := 0; j < blocks[i]; j++ {
			stride := 1
			if j == 0 {
				stride = strides[i]
			}
			x = basicBlock(b, x, fmt.Sprintf("layer%d.%d", i+1, j), s.channels(w), stride)
		}
	}
	return b.linear(b.globalAvgPool(x), "fc", s.Classes, true)
}

// buildCIFARResNet is the CIFAR ResNet of depth 6n+2 (He et al. 2016, section 4.2): three stages
// of n blocks with 16, 32 and 64 channels.
func buildCIFARResNet(b *builder, x *G.Node, s *Spec) *G.Node {
	depth, err := strconv.Atoi(strings.TrimPrefix(s.Arch, "resnet"))
	if err != nil || (depth-2)%6 != 0 {
		b.fail(fmt.Errorf("%s is not a CIFAR ResNet of depth 6n+2", s.Arch))
		return nil
	}
	n := (depth - 2) / 6
	return resNet(b, x, s, 16, []int{16, 32, 64}, []int{n, n, n}, []int{1, 2, 2})
}

// buildResNet18 is ResNet-18 with the CIFAR stem (as in the common PyTorch CIFAR code).
func buildResNet18(b *builder, x *G.Node, s *Spec) *G.Node {
	return resNet(b, x, s, 64, []int{64, 128, 256, 512}, []int{2, 2, 2, 2}, []int{1, 2, 2, 2})
}
