package baselines

import (
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipeline/pipelinetest"
)

// psgdShapes are a linear weight, a convolution kernel (8 x 27 as a matrix), a bias and a
// matrix too small to gain from compression at rank 2 (its factors would not be half its
// size).
var psgdShapes = [][]int{{40, 30}, {8, 3, 3, 3}, {40}, {4, 4}}

func psgdTensors(shapes [][]int) []pipeline.Tensor {
	ts := make([]pipeline.Tensor, len(shapes))
	for i, sh := range shapes {
		n := 1
		for _, d := range sh {
			n *= d
		}
		ts[i] = pipeline.Tensor{ID: i, Name: "p" + string(rune('a'+i)), Dims: len(sh), Shape: sh, Grad: make([]float32, n)}
	}
	return ts
}

// runPipelines runs steps steps of the pipelines newPipe builds on world in-process ranks,
// pushing grads(rank, step) in reverse tensor order; restore, when set, is every rank's
// state to start from.
func runPipelines(t *testing.T, world, steps int, shapes [][]int, grads func(r, s int) [][]float32,
	newPipe pipelinetest.Factory, restore []pipeline.State) []pipelinetest.Result {
	t.Helper()
	runs, err := pipelinetest.Job{World: world, Tensors: func() []pipeline.Tensor { return psgdTensors(shapes) },
		Steps: steps, Grads: grads, New: newPipe, Restore: restore}.Run()
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

func powerSGDFactory(cfg PowerSGDConfig, thresholdBytes int) func(dist.Communicator, []pipeline.Tensor) (pipeline.Pipeline, error) {
	return func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		return NewPowerSGD(comm, tensors, thresholdBytes, cfg)
	}
}

// normalGrads returns standard normal gradients, different for every rank and step.
func normalGrads(shapes [][]int) func(r, s int) [][]float32 {
	return func(r, s int) [][]float32 {
		ts := psgdTensors(shapes)
		rng := rand.New(rand.NewPCG(uint64(r)+7, uint64(s)))
		out := make([][]float32, len(ts))
		for i, t := range ts {
			out[i] = make([]float32, len(t.Grad))
			for j := range out[i] {
				out[i][j] = float32(rng.NormFloat64())
			}
		}
		return out
	}
}

// lowRankGrads returns gradients whose matrices all lie in one column space of dimension
// rank: rank r's matrix is U Vᵣᵀ with U shared by every rank and step, so their mean has
// rank at most rank too. Other tensors are normal noise.
func lowRankGrads(shapes [][]int, rank int) func(r, s int) [][]float32 {
	return func(r, s int) [][]float32 {
		ts := psgdTensors(shapes)
		shared := rand.New(rand.NewPCG(99, 99))
		own := rand.New(rand.NewPCG(uint64(r)+1, uint64(s)+1))
		out := make([][]float32, len(ts))
		for i, t := range ts {
			out[i] = make([]float32, len(t.Grad))
			if len(t.Shape) < 2 {
				for j := range out[i] {
					out[i][j] = float32(own.NormFloat64())
				}
				continue
			}
			rows, cols := t.Shape[0], len(t.Grad)/t.Shape[0]
			u := make([]float64, rows*rank)
			for j := range u {
				u[j] = shared.NormFloat64()
			}
			v := make([]float64, cols*rank)
			for j := range v {
				v[j] = own.NormFloat64()
			}
			for a := range rows {
				for b := range cols {
					sum := 0.0
					for k := range rank {
						sum += u[a*rank+k] * v[b*rank+k]
					}
					out[i][a*cols+b] = float32(sum)
				}
			}
		}
		return out
	}
}

// meanOf is the element-wise mean over ranks of tensor id's gradient in step s.
func meanOf(grads func(r, s int) [][]float32, world, s, id int) []float64 {
	var mean []float64
	for r := range world {
		g := grads(r, s)[id]
		if mean == nil {
			mean = make([]float64, len(g))
		}
		for j, v := range g {
			mean[j] += float64(v) / float64(world)
		}
	}
	return mean
}

// relErr is the largest difference between got and want over the largest |want|.
func relErr(got []float32, want []float64) float64 {
	diff, scale := 0.0, 1e-12
	for j := range want {
		diff = max(diff, math.Abs(float64(got[j])-want[j]))
		scale = max(scale, math.Abs(want[j]))
	}
	return diff / scale
}

func TestPowerSGDIsExactOnLowRankGradients(t *testing.T) {
	const world, rank = 3, 2
	grads := lowRankGrads(psgdShapes, rank)
	for _, threshold := range []int{1 << 20, 64} { // one fusion buffer; a buffer per tensor
		runs := runPipelines(t, world, 2, psgdShapes, grads, powerSGDFactory(PowerSGDConfig{Rank: rank, Seed: 5}, threshold), nil)
		for s := range 2 {
			for id := range psgdShapes {
				if e := relErr(runs[0].Grads[s][id], meanOf(grads, world, s, id)); e > 1e-4 {
					t.Errorf("threshold %d, step %d, tensor %v: relative error %.2g from the mean gradient, want float rounding only",
						threshold, s, psgdShapes[id], e)
				}
			}
		}
	}
}

func TestPowerSGDApproximatesFullRankGradients(t *testing.T) {
	// A rank-2 approximation of noise is far from it: the test above is not passing by
	// sending everything.
	grads := normalGrads(psgdShapes)
	runs := runPipelines(t, 2, 1, psgdShapes, grads, powerSGDFactory(PowerSGDConfig{Rank: 2, Seed: 5}, 1<<20), nil)
	if e := relErr(runs[0].Grads[0][0], meanOf(grads, 2, 0, 0)); e < 0.3 {
		t.Errorf("a rank-2 approximation of a 40x30 noise matrix is within %.2g of it", e)
	}
	m := runs[0].Metrics[0]
	// Sent: the bias (40), the 4x4 matrix (16), and (40+30)*2 and (8+27)*2 factor values.
	want := float64(40+16+140+70) / float64(1200+216+40+16)
	if !m.HasDensity || math.Abs(m.DensityAchieved-want) > 1e-9 {
		t.Errorf("density %v (reported %v), want %v", m.DensityAchieved, m.HasDensity, want)
	}
}

func TestPowerSGDRanksAgreeBitwise(t *testing.T) {
	const world = 3
	runs := runPipelines(t, world, 4, psgdShapes, normalGrads(psgdShapes), powerSGDFactory(PowerSGDConfig{Rank: 2, ErrorFeedback: true, Seed: 1}, 256), nil)
	for r := 1; r < world; r++ {
		for s := range runs[0].Grads {
			for id := range psgdShapes {
				for j, v := range runs[0].Grads[s][id] {
					if math.Float32bits(runs[r].Grads[s][id][j]) != math.Float32bits(v) {
						t.Fatalf("step %d, tensor %d, element %d: rank %d has %v, rank 0 %v", s, id, j, r, runs[r].Grads[s][id][j], v)
					}
				}
			}
		}
	}
}

// appliedAndKept sums, over the steps of runs, the gradient rank 0 applied to tensor id plus,
// with residuals, the ranks' mean residual after the last step (got), and the mean of every
// rank's gradient (want). With error feedback nothing is lost, and the two agree.
func appliedAndKept(t *testing.T, runs []pipelinetest.Result, grads func(r, s int) [][]float32, id int, residuals bool) (got []float32, want []float64) {
	t.Helper()
	world := len(runs)
	want = make([]float64, len(runs[0].Grads[0][id]))
	got = make([]float32, len(want))
	for s := range runs[0].Grads {
		for j, v := range meanOf(grads, world, s, id) {
			want[j] += v
		}
		for j, v := range runs[0].Grads[s][id] {
			got[j] += v
		}
	}
	if !residuals {
		return got, want
	}
	for r := range world {
		res := runs[r].State.Residuals[id]
		if len(res) != len(got) {
			t.Fatalf("rank %d keeps %d residual values for tensor %d, want %d", r, len(res), id, len(got))
		}
		for j, v := range res {
			got[j] += v / float32(world)
		}
	}
	return got, want
}

// With error feedback nothing is lost: over the steps, what every rank applied (the same
// averaged approximation) plus the mean of the ranks' residuals equals the mean of all the
// gradients.
func TestPowerSGDErrorFeedbackKeepsTheSum(t *testing.T) {
	const world, steps = 2, 5
	grads := normalGrads(psgdShapes)
	runs := runPipelines(t, world, steps, psgdShapes, grads, powerSGDFactory(PowerSGDConfig{Rank: 1, ErrorFeedback: true, Seed: 3}, 1<<20), nil)
	for _, id := range []int{0, 1} { // the compressed tensors
		got, want := appliedAndKept(t, runs, grads, id, true)
		if e := relErr(got, want); e > 1e-4 {
			t.Errorf("tensor %v: applied plus residual is %.2g away from the sum of the gradients", psgdShapes[id], e)
		}
	}
	if runs[0].State.Residuals[2] != nil {
		t.Error("the bias, sent whole, has a residual")
	}

	// Without error feedback the residual is dropped: the same sum misses.
	runs = runPipelines(t, world, steps, psgdShapes, grads, powerSGDFactory(PowerSGDConfig{Rank: 1, Seed: 3}, 1<<20), nil)
	got, want := appliedAndKept(t, runs, grads, 0, false)
	if e := relErr(got, want); e < 0.1 {
		t.Errorf("without error feedback the applied sum is within %.2g of the gradients' sum", e)
	}
}

// At a rank no matrix gains from, every tensor is allreduced whole: the same gradients as
// the dense pipeline, bit for bit (two ranks: the average of two values does not depend on
// the buffers' layout). The same holds during the warm-up steps at any rank.
func TestPowerSGDSendsWholeWhereItCannotGain(t *testing.T) {
	grads := normalGrads(psgdShapes)
	dense := runPipelines(t, 2, 3, psgdShapes, grads, func(c dist.Communicator, ts []pipeline.Tensor) (pipeline.Pipeline, error) {
		return NewDense(c, ts, 1<<20)
	}, nil)
	for _, tc := range []struct {
		name  string
		cfg   PowerSGDConfig
		steps int
	}{
		{"full rank", PowerSGDConfig{Rank: 1000, ErrorFeedback: true}, 3},
		{"warm-up steps", PowerSGDConfig{Rank: 1, WarmupSteps: 2, ErrorFeedback: true}, 2},
	} {
		runs := runPipelines(t, 2, tc.steps, psgdShapes, grads, powerSGDFactory(tc.cfg, 256), nil)
		for s := range tc.steps {
			for id := range psgdShapes {
				for j, v := range runs[1].Grads[s][id] {
					if math.Float32bits(v) != math.Float32bits(dense[1].Grads[s][id][j]) {
						t.Fatalf("%s: step %d, tensor %d, element %d: %v, dense gives %v", tc.name, s, id, j, v, dense[1].Grads[s][id][j])
					}
				}
			}
		}
	}
}

// A run resumed from the state after 3 steps continues exactly as the uninterrupted run.
func TestPowerSGDResumesExactly(t *testing.T) {
	grads := normalGrads(psgdShapes)
	newPipe := powerSGDFactory(PowerSGDConfig{Rank: 2, ErrorFeedback: true, Seed: 9}, 256)
	whole := runPipelines(t, 2, 6, psgdShapes, grads, newPipe, nil)
	first := runPipelines(t, 2, 3, psgdShapes, grads, newPipe, nil)
	states := []pipeline.State{first[0].State, first[1].State}
	if states[0].Extra == nil {
		t.Fatal("the state carries no Q factors")
	}
	rest := runPipelines(t, 2, 3, psgdShapes, grads, newPipe, states)
	for s := range 3 {
		for id := range psgdShapes {
			for j, v := range rest[0].Grads[s][id] {
				if math.Float32bits(v) != math.Float32bits(whole[0].Grads[3+s][id][j]) {
					t.Fatalf("resumed step %d, tensor %d, element %d: %v, uninterrupted %v", 3+s, id, j, v, whole[0].Grads[3+s][id][j])
				}
			}
		}
	}
}

func TestPowerSGDRefusesBadStateAndConfig(t *testing.T) {
	good := runPipelines(t, 1, 2, psgdShapes, normalGrads(psgdShapes), powerSGDFactory(PowerSGDConfig{Rank: 2, Seed: 1}, 256), nil)[0].State
	otherModel := runPipelines(t, 1, 2, [][]int{{40, 30}}, normalGrads([][]int{{40, 30}}), powerSGDFactory(PowerSGDConfig{Rank: 2, Seed: 1}, 256), nil)[0].State
	for _, tc := range []struct {
		name  string
		extra []byte
		want  string
	}{
		{"cut short", good.Extra[:len(good.Extra)-3], "cut short"},
		{"no magic", append([]byte("XXXX"), good.Extra[4:]...), "magic"},
		{"trailing bytes", append(append([]byte(nil), good.Extra...), 0), "after the last factor"},
		{"another model's", otherModel.Extra, "no factor for tensor"},
	} {
		st := good
		st.Extra = tc.extra
		tensors := psgdTensors(psgdShapes)
		p, err := NewPowerSGD(inproc.New(1)[0], tensors, 256, PowerSGDConfig{Rank: 2})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.(pipeline.Stateful).Restore(st); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Restore gave %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name    string
		tensors []pipeline.Tensor
		cfg     PowerSGDConfig
		want    string
	}{
		{"rank 0", psgdTensors(psgdShapes), PowerSGDConfig{Rank: 0}, "at least 1"},
		{"negative warm-up", psgdTensors(psgdShapes), PowerSGDConfig{Rank: 1, WarmupSteps: -1}, "warm-up"},
		{"no shapes", []pipeline.Tensor{{ID: 0, Name: "w", Dims: 2, Grad: make([]float32, 6)}}, PowerSGDConfig{Rank: 1}, "no known shape"},
	} {
		if _, err := NewPowerSGD(inproc.New(1)[0], tc.tensors, 256, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// Warm start makes the steps a power iteration: on the same gradient every step, each step's
// approximation is closer to the best one of its rank than the last.
func TestPowerSGDWarmStartConverges(t *testing.T) {
	fixed := func(r, s int) [][]float32 { return normalGrads(psgdShapes)(0, 0) }
	runs := runPipelines(t, 1, 6, psgdShapes, fixed, powerSGDFactory(PowerSGDConfig{Rank: 1, Seed: 2}, 1<<20), nil)
	want := meanOf(fixed, 1, 0, 0)
	first, last := relErr(runs[0].Grads[0][0], want), relErr(runs[0].Grads[5][0], want)
	if last >= 0.95*first {
		t.Errorf("error %.3g after six steps, %.3g after one: the factors are not carried from step to step", last, first)
	}
}

// A peer that leaves between steps makes the next step fail on the others, not hang: the
// failed allreduce of P must stop the step, since the allreduce of Q waits for it.
func TestPowerSGDStepFailsWhenAPeerLeaves(t *testing.T) {
	comms := inproc.New(2)
	grads := normalGrads(psgdShapes)
	pipes := make([]pipeline.Pipeline, 2)
	tensors := make([][]pipeline.Tensor, 2)
	for r := range pipes {
		tensors[r] = psgdTensors(psgdShapes)
		var err error
		if pipes[r], err = NewPowerSGD(comms[r], tensors[r], 256, PowerSGDConfig{Rank: 2, Seed: 1}); err != nil {
			t.Fatal(err)
		}
	}
	step := func(r, s int) error {
		g := grads(r, s)
		for id := len(psgdShapes) - 1; id >= 0; id-- {
			copy(tensors[r][id].Grad, g[id])
			if err := pipes[r].Push(id, tensors[r][id].Grad); err != nil {
				return err
			}
		}
		return pipes[r].Wait()
	}
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := step(r, 0); err != nil {
				t.Errorf("rank %d, first step: %v", r, err)
			}
		}()
	}
	wg.Wait()
	comms[1].Close()
	done := make(chan error, 1)
	go func() { done <- step(0, 1) }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a step without the other rank succeeded")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the step hangs after its peer left")
	}
	comms[0].Close()
}
