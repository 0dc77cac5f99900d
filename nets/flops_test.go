package nets

import (
	"math"
	"testing"
)

// TestStepFLOPs: a training step's counted work matches the architectures' published
// sizes (ResNet-20 on CIFAR: 41M multiply-adds a forward pass; VGG-16 on CIFAR: 313M) and,
// for the MLP, the direct count of its two linear layers.
func TestStepFLOPs(t *testing.T) {
	for _, tc := range []struct {
		spec     Spec
		perImage float64 // forward multiply-adds per sample
		tol      float64
	}{
		{Spec{Arch: "resnet20", BatchSize: 8, Channels: 3, Height: 32, Width: 32, Classes: 10}, 41e6, 0.03},
		{Spec{Arch: "vgg16", BatchSize: 2, Channels: 3, Height: 32, Width: 32, Classes: 10}, 313e6, 0.03},
		{Spec{Arch: "mlp", BatchSize: 4, Channels: 1, Height: 28, Width: 28, Classes: 10}, 784*128 + 128*10, 0},
	} {
		m, err := New(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		got := m.StepFLOPs() / float64(tc.spec.BatchSize)
		want := 3 * 2 * tc.perImage
		if math.Abs(got-want) > tc.tol*want {
			t.Errorf("%s: %.4g FLOPs a sample per step, want %.4g", tc.spec.Arch, got, want)
		}
		m.Close()
	}
}
