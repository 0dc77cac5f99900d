package baselines

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipeline/pipelinetest"
)

func okTopkFactory(cfg compress.Config) pipelinetest.Factory {
	return func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		return NewOkTopk(comm, tensors, cfg)
	}
}

// topKOf returns the positions of the k largest magnitudes of v (no ties in normal data).
func topKOf(v []float64, k int) []int {
	pos := make([]int, len(v))
	for i := range pos {
		pos[i] = i
	}
	slices.SortFunc(pos, func(a, b int) int { return cmp.Compare(math.Abs(v[b]), math.Abs(v[a])) })
	return pos[:min(k, len(pos))]
}

// TestOkTopkFirstStep: in the first step both thresholds are exact, so the result is the
// average, over the workers, of the k largest sums of the workers' own top-k, and zero
// elsewhere.
func TestOkTopkFirstStep(t *testing.T) {
	sizes := []int{700, 5, 1300}
	grads := pipelinetest.Normal(sizes, nil)
	const world, n, k = 3, 2005, 40
	res, err := pipelinetest.Run(world, sizes, nil, 1, grads, okTopkFactory(compress.Config{Density: float64(k) / n}))
	if err != nil {
		t.Fatal(err)
	}
	sums := make([]float64, n)
	for r := range world {
		var flat []float64
		for _, g := range grads(r, 0) {
			for _, v := range g {
				flat = append(flat, float64(float32(v)))
			}
		}
		for _, i := range topKOf(flat, k) {
			sums[i] += flat[i]
		}
	}
	want := make([]float64, n)
	for _, i := range topKOf(sums, k) {
		want[i] = sums[i] / world
	}
	var got []float32
	for _, g := range res[0].Grads[0] {
		got = append(got, g...)
	}
	for i := range want {
		if math.Abs(float64(got[i])-want[i]) > 1e-5 {
			t.Fatalf("element %d: %v, want %v", i, got[i], want[i])
		}
	}
	if m := res[0].Metrics[0]; m.DensityAchieved != float64(k)/n {
		t.Errorf("density %v, want %v", m.DensityAchieved, float64(k)/n)
	}
}

// TestOkTopkTrafficIsLinearInK is Ok-Topk's defining property: what a worker sends per
// step stays about 2k pairs (a sparse reduce-scatter, then an allgather of the reduced
// selection) however many workers there are, where an allgather of every worker's top-k
// sends (P-1)k pairs.
func TestOkTopkTrafficIsLinearInK(t *testing.T) {
	sizes := []int{20000, 100, 20000}
	grads := pipelinetest.Normal(sizes, nil)
	cfg := compress.Config{Density: 0.01, Selector: "topk"}
	k := compress.KFor(40100, cfg.Density)
	sent := func(world int, f pipelinetest.Factory) float64 {
		res, err := pipelinetest.Run(world, sizes, nil, 16, grads, f)
		if err != nil {
			t.Fatal(err)
		}
		// Steps 8-15 run on kept thresholds, as most steps do, once they have caught up
		// with the residuals' growth.
		var total float64
		for _, r := range res {
			for _, m := range r.Metrics[8:] {
				total += float64(m.BytesSent)
			}
		}
		return total / float64(8*world)
	}
	ok := map[int]float64{}
	gather := map[int]float64{}
	for _, world := range []int{2, 4, 8} {
		ok[world] = sent(world, okTopkFactory(cfg))
		gather[world] = sent(world, sparseFactory("multitensor", 1<<30, cfg))
		t.Logf("P=%d: Ok-Topk sends %.0f bytes a step (%.2f pairs of k), an allgather of top-k %.0f", world, ok[world], ok[world]/8/float64(k), gather[world])
		if bound := 3*8*float64(k) + 64*float64(world); ok[world] > bound {
			t.Errorf("P=%d: Ok-Topk sends %.0f bytes a step, more than 3k pairs (%.0f)", world, ok[world], bound)
		}
	}
	// Both collectives send a (P-1)/P share of what they move, which grows from 1/2 to
	// 7/8 between 2 and 8 workers; the rest must not grow.
	if ok[8] > 2*ok[2] || ok[8] > 1.5*ok[4] {
		t.Errorf("Ok-Topk's traffic grows from %.0f (P=2) and %.0f (P=4) to %.0f bytes (P=8)", ok[2], ok[4], ok[8])
	}
	if gather[8] < 4*gather[2] {
		t.Errorf("the allgather's traffic grows only from %.0f to %.0f bytes between 2 and 8 workers: the comparison shows nothing", gather[2], gather[8])
	}
}

// TestOkTopkRanksAgree runs past both periods, with and without momentum correction and
// density warm-up: every rank ends every step with bit-identical gradients, and the
// density stays near the target.
func TestOkTopkRanksAgree(t *testing.T) {
	sizes := []int{1000, 10, 3000, 33, 1}
	grads := scaled(sizes, 0.02)
	for _, cfg := range []compress.Config{{Density: 0.05}, {Density: 0.05, Momentum: 0.9, WarmupSteps: 3}} {
		res, err := pipelinetest.Run(4, sizes, nil, OkTopkRepartitionPeriod+3, grads, okTopkFactory(cfg))
		if err != nil {
			t.Fatal(err)
		}
		if err := pipelinetest.CheckRanksAgree(res); err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
		for s, m := range res[0].Metrics[10:] {
			if m.DensityAchieved < 0.05/3 || m.DensityAchieved > 0.05*3 {
				t.Errorf("%+v, step %d: density %v, target 0.05", cfg, s+10, m.DensityAchieved)
			}
		}
	}
}

// TestOkTopkErrorFeedbackKeepsTheSum: nothing is lost: over the steps, what every rank
// applied plus the mean of the ranks' residuals equals the mean of all the gradients.
func TestOkTopkErrorFeedbackKeepsTheSum(t *testing.T) {
	shapes := [][]int{{500}, {7}, {900}}
	grads := normalGrads(shapes)
	runs := runPipelines(t, 3, 6, shapes, grads, okTopkFactory(compress.Config{Density: 0.03}), nil)
	for id := range shapes {
		got, want := appliedAndKept(t, runs, grads, id, true)
		if e := relErr(got, want); e > 1e-4 {
			t.Errorf("tensor %d: applied plus residual is %.2g away from the sum of the gradients", id, e)
		}
	}
	runs = runPipelines(t, 3, 6, shapes, grads, okTopkFactory(compress.Config{Density: 0.03, NoErrorFeedback: true}), nil)
	got, want := appliedAndKept(t, runs, grads, 2, false)
	if e := relErr(got, want); e < 0.1 {
		t.Errorf("without error feedback the applied sum is within %.2g of the gradients' sum", e)
	}
}

// TestOkTopkResume: a run resumed across a threshold period and a repartition continues
// exactly as one that never stopped.
func TestOkTopkResume(t *testing.T) {
	sizes := []int{3000, 16, 700, 5}
	grads := scaled(sizes, 0.1)
	for _, cfg := range []compress.Config{{Density: 0.02}, {Density: 0.02, Momentum: 0.9, WarmupSteps: 4}} {
		if err := pipelinetest.CheckResume(3, sizes, OkTopkRepartitionPeriod+4, OkTopkThresholdPeriod+3, grads, okTopkFactory(cfg)); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// TestOkTopkRefusesForeignState: a state of another world size, model or pipeline is
// refused, naming what differs, and leaves the pipeline as it was.
func TestOkTopkRefusesForeignState(t *testing.T) {
	newOn := func(world int, sizes []int) *OkTopk {
		x, err := NewOkTopk(inproc.New(world)[0], pipelinetest.Tensors(sizes), compress.Config{Density: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	saved, err := newOn(2, []int{100, 50}).State()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		x     *OkTopk
		extra []byte
		want  string
	}{
		{"world", newOn(3, []int{100, 50}), saved.Extra, "regions"},
		{"model", newOn(2, []int{100, 51}), saved.Extra, "gradient elements"},
		{"other pipeline", newOn(2, []int{100, 50}), []byte{1, 2, 3}, "bytes"},
		{"version", newOn(2, []int{100, 50}), append([]byte{9, 0, 0, 0}, saved.Extra[4:]...), "version 9"},
	} {
		before := tc.x.extraState()
		st := saved
		st.Extra = tc.extra
		err := tc.x.Restore(st)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error about %q", tc.name, err, tc.want)
		}
		if !slices.Equal(before, tc.x.extraState()) {
			t.Errorf("%s: a refused state changed the pipeline", tc.name)
		}
	}
}

// TestOkTopkRepartition: boundaries move to where the workers' selections split into equal
// parts, so that regions over dense selections shrink.
func TestOkTopkRepartition(t *testing.T) {
	sizes := []int{4000, 4000}
	// Large values in the first 1000 elements only: every selection lies there.
	grads := func(rank, step int) [][]float32 {
		g := pipelinetest.Normal(sizes, nil)(rank, step)
		for i := range 1000 {
			g[0][i] *= 100
		}
		return g
	}
	var pipes [2]*OkTopk
	_, err := pipelinetest.Run(2, sizes, nil, 1, grads, func(comm dist.Communicator, ts []pipeline.Tensor) (pipeline.Pipeline, error) {
		x, err := NewOkTopk(comm, ts, compress.Config{Density: 0.05})
		pipes[comm.Rank()] = x
		return x, err
	})
	if err != nil {
		t.Fatal(err)
	}
	for r, x := range pipes {
		if b := x.bounds; len(b) != 3 || b[0] != 0 || b[2] != 8000 || b[1] < 300 || b[1] > 700 {
			t.Errorf("rank %d: boundaries %v, want the middle one near 500", r, b)
		}
	}
}
