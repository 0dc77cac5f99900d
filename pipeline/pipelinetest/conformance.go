package pipelinetest

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipelines"
)

// conformanceShapes are the tensors the conformance suite runs pipelines on: matrices and
// vectors, every one large enough for the size rules to sparsify it and for a density of
// 0.01 to pick whole elements from it, so that the density a step achieves can be held
// to the target.
var conformanceShapes = [][]int{{64, 160}, {9000}, {128, 96}, {20000}, {100, 120}, {12288}}

// conformanceTensors builds one rank's tensors of conformanceShapes.
func conformanceTensors() []pipeline.Tensor {
	ts := make([]pipeline.Tensor, len(conformanceShapes))
	for i, shape := range conformanceShapes {
		n := 1
		for _, d := range shape {
			n *= d
		}
		ts[i] = pipeline.Tensor{ID: i, Name: fmt.Sprintf("t%d", i), Dims: len(shape), Shape: shape, Grad: make([]float32, n)}
	}
	return ts
}

func conformanceSizes() []int {
	var sizes []int
	for _, t := range conformanceTensors() {
		sizes = append(sizes, len(t.Grad))
	}
	return sizes
}

// Conformance holds a registered pipeline to what every pipeline promises, with its
// default settings but, where it fuses, a smaller fusion buffer so that the tensors span
// several:
//   - at 1, 2 and 4 ranks, every rank ends every step with bit-identical gradients;
//   - the density each step achieves is within the spec's Tolerance of the target;
//   - the bytes the pipeline reports sending are the bytes its communicator sent;
//   - a run resumed from every rank's saved state, early and late, and with a randomised
//     selector where the pipeline takes one, continues bit for bit as the uninterrupted
//     run does;
//   - a key the pipeline does not read, set away from its default, and a density out of
//     range are refused by name.
func Conformance(t *testing.T, spec pipelines.Spec) {
	t.Helper()
	set := pipelines.DefaultSettings()
	set.Pipeline = spec.Name
	if spec.ReadsKey("fusion-mb") {
		set.FusionMB = 0.05
	}
	const steps = 6
	grads := Normal(conformanceSizes(), []float32{1, 0.5, 2, 1, 0.01, 1})
	// Planners plan on a link whose start-up cost dwarfs every measured time, so that
	// their plans, and with them the resumed runs, do not depend on the machine's timing.
	plan := &netmodel.Network{Inter: netmodel.Link{Alpha: 1, Beta: 1e-9}}
	jobWith := func(world int, set pipelines.Settings) Job {
		return Job{World: world, Tensors: conformanceTensors, Steps: steps, Grads: grads,
			New: pipelines.Factory(pipelines.Build{Settings: set, Seed: 7, Momentum: 0.9, Network: plan})}
	}
	job := func(world int) Job { return jobWith(world, set) }
	for _, world := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("%d ranks", world), func(t *testing.T) {
			res, err := job(world).Run()
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckRanksAgree(res); err != nil {
				t.Errorf("ranks disagree: %v", err)
			}
			if err := checkDensity(res, spec.Tolerance, set.Density); err != nil {
				t.Error(err)
			}
			if err := checkTraffic(res); err != nil {
				t.Error(err)
			}
		})
	}
	for _, split := range []int{1, steps / 2} {
		t.Run(fmt.Sprintf("resumed at step %d", split), func(t *testing.T) {
			if err := job(2).CheckResume(split); err != nil {
				t.Error(err)
			}
		})
	}
	if spec.ReadsKey("selector") {
		// A randomised selector's draws must come back with the checkpoint too.
		random := set
		random.Selector = "randomk"
		t.Run("resumed with random-k", func(t *testing.T) {
			if err := jobWith(2, random).CheckResume(steps / 2); err != nil {
				t.Error(err)
			}
		})
	}
	t.Run("bad settings", func(t *testing.T) { checkRefusals(t, spec, set) })
}

// checkDensity reports a step whose achieved density strays more than tolerance (a
// fraction of the target) from the target; none when tolerance is 0.
func checkDensity(res []Result, tolerance, target float64) error {
	if tolerance == 0 {
		return nil
	}
	for r, rank := range res {
		for s, m := range rank.Metrics {
			if !m.HasDensity {
				return fmt.Errorf("rank %d, step %d: no density reported, though the pipeline states a tolerance", r, s)
			}
			if off := math.Abs(m.DensityAchieved-target) / target; off > tolerance {
				return fmt.Errorf("rank %d, step %d: density %.5f, target %g: off by %.0f%%, tolerance %.0f%%",
					r, s, m.DensityAchieved, target, 100*off, 100*tolerance)
			}
		}
	}
	return nil
}

// checkTraffic reports a rank whose reported bytes differ from what its communicator sent.
func checkTraffic(res []Result) error {
	for r, rank := range res {
		var reported int64
		for _, m := range rank.Metrics {
			reported += m.BytesSent
		}
		if reported != rank.Stats.BytesSent {
			return fmt.Errorf("rank %d: the steps report %d bytes sent, the communicator sent %d", r, reported, rank.Stats.BytesSent)
		}
	}
	return nil
}

// awayFromDefault sets each key of pipelines.Settings to a valid value other than its
// default, and density to one out of range.
var awayFromDefault = map[string]func(*pipelines.Settings){
	"density":               func(s *pipelines.Settings) { s.Density = 2 },
	"fusion-mb":             func(s *pipelines.Settings) { s.FusionMB = 7 },
	"selector":              func(s *pipelines.Settings) { s.Selector = "randomk" },
	"select-threshold":      func(s *pipelines.Settings) { s.SelectThreshold = 100 },
	"select-rule":           func(s *pipelines.Settings) { s.SelectRule = "rank" },
	"select-workers":        func(s *pipelines.Settings) { s.SelectWorkers = 2 },
	"density-warmup-steps":  func(s *pipelines.Settings) { s.DensityWarmupSteps = 10 },
	"exdyna-threshold":      func(s *pipelines.Settings) { s.ExDynaThreshold = "paper" },
	"safusion-align":        func(s *pipelines.Settings) { s.SAFusionAlign = false },
	"powersgd-rank":         func(s *pipelines.Settings) { s.PowerSGDRank = 4 },
	"powersgd-warmup-steps": func(s *pipelines.Settings) { s.PowerSGDWarmupSteps = 3 },
	"momentum-correction":   func(s *pipelines.Settings) { s.MomentumCorrection = true },
	"error-feedback":        func(s *pipelines.Settings) { s.ErrorFeedback = false },
	"cost-alpha":            func(s *pipelines.Settings) { s.CostAlpha = 1e-4 },
	"cost-beta":             func(s *pipelines.Settings) { s.CostBeta = 1e-9 },
	"select-ns":             func(s *pipelines.Settings) { s.SelectNS = 5 },
}

// checkRefusals sets, one at a time, each key spec does not read away from its default,
// and a density out of range, and wants each refused with an error naming the key.
func checkRefusals(t *testing.T, spec pipelines.Spec, set pipelines.Settings) {
	t.Helper()
	for _, key := range pipelines.Keys() {
		edit, ok := awayFromDefault[key]
		if !ok {
			t.Errorf("no value away from the default for key %s: add one to awayFromDefault", key)
			continue
		}
		if spec.ReadsKey(key) && key != "density" {
			continue
		}
		s := set
		edit(&s)
		err := pipelines.Check(s)
		if err == nil {
			t.Errorf("%s away from its default: accepted", key)
		} else if !strings.Contains(err.Error(), key) {
			t.Errorf("%s away from its default: error %q does not name it", key, err)
		}
	}
}
