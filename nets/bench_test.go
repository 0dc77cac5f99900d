package nets

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time the process has used: with other work on the machine, CPU time per step
// is steadier than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchTrainStep times TrainStep with a hook that reads every gradient (as a pipeline would) and
// reports samples (or tokens) per second.
func benchTrainStep(b *testing.B, s Spec, unit string, perSample int) {
	m, err := New(s)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	batch := randBatch(s, s.BatchSize, 1)
	var sink float32
	m.SetHook(func(_ int, g []float32) { sink += g[0] })
	if _, err := m.TrainStep(batch); err != nil { // warm-up: first-use allocations
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		if _, err := m.TrainStep(batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*s.BatchSize*perSample)/b.Elapsed().Seconds(), unit+"/s")
	b.ReportMetric(float64((cpuTime()-cpu).Milliseconds())/float64(b.N), "cpu-ms/op")
	// The step's counted work over its time, for comparison with the machine's peak
	// (kernels.MeasurePeak): tools/bench-vs-pytorch prints it as a fraction of that peak.
	b.ReportMetric(m.StepFLOPs()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	_ = sink
}

func BenchmarkTrainStep(b *testing.B) {
	b.Run("resnet20", func(b *testing.B) {
		benchTrainStep(b, Spec{Arch: "resnet20", BatchSize: 32, Channels: 3, Height: 32, Width: 32, Classes: 10}, "samples", 1)
	})
	b.Run("vgg16", func(b *testing.B) {
		benchTrainStep(b, Spec{Arch: "vgg16", BatchSize: 32, Channels: 3, Height: 32, Width: 32, Classes: 10}, "samples", 1)
	})
	b.Run("lstm", func(b *testing.B) {
		s := Spec{Arch: "lstm", BatchSize: 20, Vocab: 10000, SeqLen: 35, HSize: 200, Layers: 2}
		benchTrainStep(b, s, "tokens", s.SeqLen)
	})
}

func BenchmarkEvaluate(b *testing.B) {
	s := Spec{Arch: "resnet20", BatchSize: 32, Channels: 3, Height: 32, Width: 32, Classes: 10}
	m, err := New(s)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	batch := randBatch(s, s.BatchSize, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.Evaluate(batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*s.BatchSize)/b.Elapsed().Seconds(), "samples/s")
}
