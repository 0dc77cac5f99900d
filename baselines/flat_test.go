package baselines

import (
	"errors"
	"math"
	"testing"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/pipeline/pipelinetest"
)

// flatPipelines are the pipelines built on flatGradient, by name.
var flatPipelines = map[string]func(compress.Config) pipelinetest.Factory{
	"exdyna": func(cfg compress.Config) pipelinetest.Factory { return exdynaFactory(cfg) },
	"oktopk": okTopkFactory,
	"spardl": sparDLFactory,
}

// TestFlatPipelinesAtDensityOneAreDense: sending every element gives the dense average,
// reported as density 1 with nothing missing.
func TestFlatPipelinesAtDensityOneAreDense(t *testing.T) {
	sizes := []int{300, 7, 1, 0, 2000, 64}
	grads := pipelinetest.Normal(sizes, nil)
	for name, factory := range flatPipelines {
		for _, world := range []int{1, 3} {
			res, err := pipelinetest.Run(world, sizes, nil, 3, grads, factory(compress.Config{Density: 1, Momentum: 0.5}))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := pipelinetest.CheckMean(res, grads, 1e-6); err != nil {
				t.Fatalf("%s, world %d: %v", name, world, err)
			}
			for r := range res {
				for s, m := range res[r].Metrics {
					if !m.HasDensity || m.DensityAchieved != 1 || m.TensorsMissing != 0 {
						t.Errorf("%s, world %d: rank %d step %d metrics %+v, want density 1 and nothing missing", name, world, r, s, m)
					}
				}
			}
		}
	}
}

// TestFlatPipelinesRejectNonFinite: a non-finite gradient element fails the step on every
// rank with a NonFiniteError, before it reaches a memory that would keep it.
func TestFlatPipelinesRejectNonFinite(t *testing.T) {
	sizes := []int{100, 100}
	grads := func(rank, step int) [][]float32 {
		g := pipelinetest.Normal(sizes, nil)(rank, step)
		if step == 1 {
			g[1][7] = float32(math.Inf(-1))
		}
		return g
	}
	for name, factory := range flatPipelines {
		_, err := pipelinetest.Run(3, sizes, nil, 2, grads, factory(compress.Config{Density: 0.1}))
		var nf *compress.NonFiniteError
		if !errors.As(err, &nf) {
			t.Errorf("%s: error %v is not a NonFiniteError", name, err)
		}
	}
}
