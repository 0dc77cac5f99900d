package ssfusion

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/baselines"
	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/nets"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipeline/pipelinetest"
)

// BenchmarkPipelines runs one synchronisation step of every pipeline on the real tensor
// lists of ResNet-20 and VGG-16 (CIFAR-10 shapes), two in-process ranks, density 0.01, the
// default 64 MB fusion buffers and SSFusion's default threshold. Beside the time per step it
// reports selection time, bytes sent and achieved density per step:
//
//	go test ./ssfusion -run XXX -bench Pipelines -benchtime 20x
func BenchmarkPipelines(b *testing.B) {
	cfg := compress.Config{Density: 0.01, Selector: "topk"}
	const fusion = 64 << 20
	factories := []struct {
		name string
		f    pipelinetest.Factory
	}{
		{"dense", func(c dist.Communicator, ts []pipeline.Tensor) (pipeline.Pipeline, error) {
			return baselines.NewDense(c, ts, fusion)
		}},
		{"pertensor", func(c dist.Communicator, ts []pipeline.Tensor) (pipeline.Pipeline, error) {
			return baselines.NewPerTensor(c, ts, fusion, cfg)
		}},
		{"multitensor", func(c dist.Communicator, ts []pipeline.Tensor) (pipeline.Pipeline, error) {
			return baselines.NewMultiTensor(c, ts, fusion, cfg)
		}},
		{"ssfusion", func(c dist.Communicator, ts []pipeline.Tensor) (pipeline.Pipeline, error) {
			return New(c, ts, fusion, Config{Config: cfg, Threshold: 8192, Offload: true, SelectWorkers: 1, Interleave: true})
		}},
	}
	for _, arch := range []string{"resnet20", "vgg16"} {
		sizes := paramSizes(b, arch)
		for _, fac := range factories {
			b.Run(arch+"/"+fac.name, func(b *testing.B) { benchPipeline(b, sizes, fac.f) })
		}
	}
}

// paramSizes lists the parameter sizes of arch for 3x32x32 inputs and 10 classes.
func paramSizes(b *testing.B, arch string) []int {
	m, err := nets.New(nets.Spec{Arch: arch, BatchSize: 2, Seed: 1, Channels: 3, Height: 32, Width: 32, Classes: 10})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	var sizes []int
	for _, p := range m.Params() {
		sizes = append(sizes, p.Numel())
	}
	return sizes
}

func benchPipeline(b *testing.B, sizes []int, newPipe pipelinetest.Factory) {
	const world = 2
	comms := inproc.New(world)
	var wg sync.WaitGroup
	var sparsify time.Duration
	var bytes int64
	var density float64
	errs := make([]error, world)
	b.ResetTimer()
	for r := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer comms[r].Close()
			tensors := pipelinetest.Tensors(sizes)
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			for _, t := range tensors {
				for i := range t.Grad {
					t.Grad[i] = float32(rng.NormFloat64())
				}
			}
			grads := make([][]float32, len(tensors))
			for i, t := range tensors {
				grads[i] = append([]float32(nil), t.Grad...)
			}
			p, err := newPipe(comms[r], tensors)
			if err != nil {
				errs[r] = err
				return
			}
			defer p.Close()
			for range b.N + 1 { // the first step learns the plan
				for id := len(tensors) - 1; id >= 0; id-- {
					if err := p.Push(id, grads[id]); err != nil {
						errs[r] = err
						return
					}
				}
				if err := p.Wait(); err != nil {
					errs[r] = err
					return
				}
				if r == 0 {
					m := p.Metrics()
					sparsify += m.Sparsify
					bytes += m.BytesSent
					density += m.DensityAchieved
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	steps := float64(b.N + 1)
	b.ReportMetric(sparsify.Seconds()*1000/steps, "select-ms/step")
	b.ReportMetric(float64(bytes)/steps, "bytes/step")
	b.ReportMetric(density/steps, "density")
}
