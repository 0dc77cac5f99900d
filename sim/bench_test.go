package sim

import (
	"context"
	"testing"

	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/profile"
)

// BenchmarkResNet50At256 simulates the six pipelines on the shipped ResNet-50 profile at 256
// workers over 10 Gbit/s links, with the default steps: the issue asks for under a minute on
// 2 cores per op.
func BenchmarkResNet50At256(b *testing.B) {
	prof, err := profile.Builtin("resnet50")
	if err != nil {
		b.Fatal(err)
	}
	link, _ := netmodel.NetworkPreset(10e9)
	sweep := &Sweep{
		Profiles: []*profile.Profile{prof}, Pipelines: []string{"dense", "pertensor", "multitensor", "ssfusion", "safusion", "exdyna"},
		Workers: []int{256}, Networks: []Net{{Name: "10Gbit", Model: netmodel.Network{Inter: link}}},
		Selection: DefaultSelectionModel(), Density: 0.01, Seed: 1,
		Factory: func(name string, _ Net) (Factory, error) { return factories[name], nil },
	}
	for b.Loop() {
		points, err := sweep.Run(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if len(points) != 6 {
			b.Fatalf("%d points", len(points))
		}
	}
}
