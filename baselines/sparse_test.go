package baselines

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipeline/pipelinetest"
)

func sparseFactory(name string, thresholdBytes int, cfg compress.Config) pipelinetest.Factory {
	return func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		if name == "pertensor" {
			return NewPerTensor(comm, tensors, thresholdBytes, cfg)
		}
		return NewMultiTensor(comm, tensors, thresholdBytes, cfg)
	}
}

// TestSparseAtDensityOneIsDense: sending every element must give the dense average.
func TestSparseAtDensityOneIsDense(t *testing.T) {
	sizes := []int{300, 7, 1, 0, 2000, 64}
	grads := pipelinetest.Normal(sizes, nil)
	for _, name := range []string{"pertensor", "multitensor"} {
		for _, threshold := range []int{4 * 100, 1 << 20} {
			res, err := pipelinetest.Run(3, sizes, nil, 3, grads, sparseFactory(name, threshold, compress.Config{Density: 1, Selector: "topk"}))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := pipelinetest.CheckMean(res, grads, 1e-6); err != nil {
				t.Fatalf("%s, threshold %d: %v", name, threshold, err)
			}
			for r := range res {
				for s, m := range res[r].Metrics {
					if !m.HasDensity || m.DensityAchieved != 1 || m.TensorsMissing != 0 {
						t.Errorf("%s: rank %d step %d metrics %+v, want density 1 and nothing missing", name, r, s, m)
					}
				}
			}
		}
	}
}

// TestMissingTensors: next to large tensors with large gradients, tensors with small
// gradients (biases, norms) lose the buffer-wide top-k in multi-tensor sparsification and
// go missing; per-tensor sparsification gives every tensor at least one element.
func TestMissingTensors(t *testing.T) {
	sizes := []int{4000, 16, 4000, 16, 4000}
	scale := []float32{1, 1e-3, 1, 1e-3, 1}
	grads := pipelinetest.Normal(sizes, scale)
	cfg := compress.Config{Density: 0.01, Selector: "topk"}
	const steps = 4
	for _, tc := range []struct {
		name        string
		wantMissing bool
	}{{"multitensor", true}, {"pertensor", false}} {
		res, err := pipelinetest.Run(2, sizes, nil, steps, grads, sparseFactory(tc.name, 1<<20, cfg))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for r := range res {
			for s, m := range res[r].Metrics {
				if got := m.TensorsMissing > 0; got != tc.wantMissing {
					t.Errorf("%s rank %d step %d: %d tensors missing", tc.name, r, s, m.TensorsMissing)
				}
				if s == 0 && tc.wantMissing {
					// In the first step the small tensors have nothing that could compete:
					// exactly both go missing, and their averaged gradient is zero.
					if m.TensorsMissing != 2 {
						t.Errorf("%s rank %d: %d tensors missing in step 0, want 2", tc.name, r, m.TensorsMissing)
					}
					if g := res[r].Grads[0][1]; slices.ContainsFunc(g, func(v float32) bool { return v != 0 }) {
						t.Errorf("%s: a missing tensor has a non-zero aggregated gradient", tc.name)
					}
				}
			}
		}
	}
}

// TestPerTensorAggregates compares per-tensor sparsification with a direct computation:
// every rank's top k_i of its error-fed gradient, averaged; without error feedback, the
// top k_i of the step's raw gradient.
func TestPerTensorAggregates(t *testing.T) {
	sizes := []int{500, 3, 5000, 40}
	grads := pipelinetest.Normal(sizes, nil)
	const world, steps, density = 3, 4, 0.02
	for _, feedback := range []bool{true, false} {
		cfg := compress.Config{Density: density, Selector: "topk", NoErrorFeedback: !feedback}
		res, err := pipelinetest.Run(world, sizes, nil, steps, grads, sparseFactory("pertensor", 4*600, cfg))
		if err != nil {
			t.Fatal(err)
		}
		groups := [][]int{{0}, {1}, {2}, {3}}
		want := pipelinetest.TopKReference(world, steps, sizes, grads, groups, density, feedback)
		if err := pipelinetest.CheckReference(res, want, 1e-6); err != nil {
			t.Errorf("error feedback %v: %v", feedback, err)
		}
	}
}

// TestMultiTensorAggregates compares multi-tensor sparsification with a direct
// computation: with every tensor in one fusion buffer, every rank's top k of the whole
// buffer's error-fed gradient, k set by the buffer's size, averaged.
func TestMultiTensorAggregates(t *testing.T) {
	sizes := []int{500, 3, 5000, 40}
	grads := pipelinetest.Normal(sizes, []float32{1, 10, 0.1, 1})
	const world, steps, density = 3, 4, 0.02
	for _, feedback := range []bool{true, false} {
		cfg := compress.Config{Density: density, Selector: "topk", NoErrorFeedback: !feedback}
		res, err := pipelinetest.Run(world, sizes, nil, steps, grads, sparseFactory("multitensor", 1<<20, cfg))
		if err != nil {
			t.Fatal(err)
		}
		want := pipelinetest.TopKReference(world, steps, sizes, grads, [][]int{{0, 1, 2, 3}}, density, feedback)
		if err := pipelinetest.CheckReference(res, want, 1e-6); err != nil {
			t.Errorf("error feedback %v: %v", feedback, err)
		}
	}
}

// TestNoErrorFeedbackForgets: without error feedback a step's aggregate depends on that
// step's gradients alone, so a run's third step equals a fresh run's first step on the
// same gradients, bit for bit; with error feedback the residuals make them differ.
func TestNoErrorFeedbackForgets(t *testing.T) {
	sizes := []int{1000, 10, 3000, 33, 1}
	grads := pipelinetest.Normal(sizes, []float32{1, 0.01, 1, 0.1, 1})
	later := func(rank, step int) [][]float32 { return grads(rank, step+2) }
	factories := map[string]func(compress.Config) pipelinetest.Factory{
		"pertensor":   func(c compress.Config) pipelinetest.Factory { return sparseFactory("pertensor", 4*1500, c) },
		"multitensor": func(c compress.Config) pipelinetest.Factory { return sparseFactory("multitensor", 4*1500, c) },
		"safusion": func(c compress.Config) pipelinetest.Factory {
			return safusionFactory(4*1500, c, netmodel.Network{}, 2, nil)
		},
	}
	for name, factory := range factories {
		for _, feedback := range []bool{false, true} {
			cfg := compress.Config{Density: 0.02, Selector: "topk", NoErrorFeedback: !feedback}
			long, err := pipelinetest.Run(3, sizes, nil, 3, grads, factory(cfg))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := pipelinetest.CheckRanksAgree(long); err != nil {
				t.Fatalf("%s, error feedback %v: %v", name, feedback, err)
			}
			fresh, err := pipelinetest.Run(3, sizes, nil, 1, later, factory(cfg))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			same := true
			for i := range sizes {
				same = same && slices.Equal(long[0].Grads[2][i], fresh[0].Grads[0][i])
			}
			if same == feedback {
				t.Errorf("%s, error feedback %v: third step equals a fresh first step: %v", name, feedback, same)
			}
		}
	}
}

// TestSparseRanksAgree: every rank must end each step with bit-identical gradients, or
// the model replicas drift apart.
func TestSparseRanksAgree(t *testing.T) {
	sizes := []int{1000, 10, 3000, 33, 1}
	grads := pipelinetest.Normal(sizes, nil)
	for _, name := range []string{"pertensor", "multitensor"} {
		res, err := pipelinetest.Run(4, sizes, nil, 5, grads, sparseFactory(name, 4*1500, compress.Config{Density: 0.05, Selector: "topk"}))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := pipelinetest.CheckRanksAgree(res); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

func TestSparseConfigErrors(t *testing.T) {
	comm := inproc.New(1)[0]
	defer comm.Close()
	tensors := pipelinetest.Tensors([]int{10})
	for _, cfg := range []compress.Config{
		{Density: 0, Selector: "topk"},
		{Density: 1.5, Selector: "topk"},
		{Density: 0.1, Selector: "nope"},
		{Density: 0.1, Selector: "topk", Momentum: 1},
	} {
		if _, err := NewPerTensor(comm, tensors, 1024, cfg); err == nil {
			t.Errorf("per-tensor accepted %+v", cfg)
		}
		if _, err := NewMultiTensor(comm, tensors, 1024, cfg); err == nil {
			t.Errorf("multi-tensor accepted %+v", cfg)
		}
	}
}

func TestSparseRejectsNonFinite(t *testing.T) {
	sizes := []int{100, 100}
	grads := func(rank, step int) [][]float32 {
		g := pipelinetest.Normal(sizes, nil)(rank, step)
		if step == 1 {
			g[0][7] = float32(math.NaN())
		}
		return g
	}
	for _, name := range []string{"pertensor", "multitensor"} {
		_, err := pipelinetest.Run(2, sizes, nil, 2, grads, sparseFactory(name, 1<<20, compress.Config{Density: 0.1, Selector: "topk"}))
		if err == nil {
			t.Fatalf("%s: a NaN gradient passed", name)
		}
		var nf *compress.NonFiniteError
		if !errors.As(err, &nf) {
			t.Fatalf("%s: error %v is not a NonFiniteError", name, err)
		}
	}
}

// TestDensityWarmup: with warm-up the first steps send more, then the target density.
func TestDensityWarmup(t *testing.T) {
	sizes := []int{10000, 20000}
	grads := pipelinetest.Normal(sizes, nil)
	cfg := compress.Config{Density: 0.01, Selector: "topk", WarmupSteps: 2}
	for _, name := range []string{"pertensor", "multitensor"} {
		res, err := pipelinetest.Run(2, sizes, nil, 4, grads, sparseFactory(name, 1<<20, cfg))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for s, want := range []float64{0.25, 0.05, 0.01, 0.01} {
			if got := res[0].Metrics[s].DensityAchieved; math.Abs(got-want) > 1e-4 {
				t.Errorf("%s step %d: density %g, want %g", name, s, got, want)
			}
		}
	}
}

// TestSparseResume: a pipeline restored from a checkpoint of its state continues exactly as
// one that never stopped, with plain error feedback and with DGC's momentum correction and
// density warm-up (which reads the step count).
func TestSparseResume(t *testing.T) {
	sizes := []int{3000, 16, 700, 5}
	grads := pipelinetest.Normal(sizes, nil)
	configs := map[string]compress.Config{
		"plain": {Density: 0.02, Selector: "topk"},
		"dgc":   {Density: 0.02, Selector: "topk", Momentum: 0.9, WarmupSteps: 4},
	}
	for _, name := range []string{"pertensor", "multitensor"} {
		for cname, cfg := range configs {
			if err := pipelinetest.CheckResume(3, sizes, 6, 3, grads, sparseFactory(name, 4*1000, cfg)); err != nil {
				t.Errorf("%s, %s: %v", name, cname, err)
			}
		}
	}
}
