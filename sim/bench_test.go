package sim

import (
	"context"
	"syscall"
	"testing"

	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipelines"
	"github.com/ssfusion/ssfusion/profile"
)

// BenchmarkResNet50At256 simulates the six pipelines on the shipped ResNet-50 profile at 256
// workers over 10 Gbit/s links, with the default steps: the goal is under a minute on 2
// cores per op. It reports the process's peak resident memory too; run it alone for that
// figure to be the sweep's (go test ./sim -run '^$' -bench ResNet50At256).
func BenchmarkResNet50At256(b *testing.B) {
	prof, err := profile.Builtin("resnet50")
	if err != nil {
		b.Fatal(err)
	}
	link, _ := netmodel.NetworkPreset(10e9)
	sweep := &Sweep{
		Profiles: []*profile.Profile{prof}, Pipelines: []string{"dense", "pertensor", "multitensor", "ssfusion", "safusion", "exdyna"},
		Workers: []int{256}, Networks: []Net{{Name: "10Gbit", Model: netmodel.Network{Inter: link}}},
		Selection: DefaultSelectionModel(), Settings: benchSettings(), Seed: 1,
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
	reportPeakRSS(b)
}

// BenchmarkBERTBaseMemory runs two allgather pipelines on the shipped BERT-base profile
// (110 M gradient elements) at 256 workers, two jobs at a time under the default 2 GB
// budget of simulate, and reports the process's peak resident memory: the goal is under
// 2 GB. Run it alone (go test ./sim -run '^$' -bench BERTBaseMemory -benchtime 1x).
func BenchmarkBERTBaseMemory(b *testing.B) {
	prof, err := profile.Builtin("bert-base")
	if err != nil {
		b.Fatal(err)
	}
	link, _ := netmodel.NetworkPreset(10e9)
	sweep := &Sweep{
		Profiles: []*profile.Profile{prof}, Pipelines: []string{"pertensor", "ssfusion"},
		Workers: []int{256}, Networks: []Net{{Name: "10Gbit", Model: netmodel.Network{Inter: link}}},
		Selection: DefaultSelectionModel(), Settings: benchSettings(), Seed: 1, Parallel: 2, MemoryLimit: 2e9,
	}
	for b.Loop() {
		if _, err := sweep.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	reportPeakRSS(b)
}

// reportPeakRSS reports the process's peak resident memory so far, in MB.
func reportPeakRSS(b *testing.B) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MB") // Maxrss is in KiB on Linux
	}
}

// benchSettings are the pipelines' defaults with fusion buffers of 16 KiB.
func benchSettings() pipelines.Settings {
	s := pipelines.DefaultSettings()
	s.FusionMB = 1.0 / 64
	return s
}
