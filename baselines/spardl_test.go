package baselines

import (
	"math"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipeline/pipelinetest"
)

func sparDLFactory(cfg compress.Config) pipelinetest.Factory {
	return func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		return NewSparDL(comm, tensors, cfg)
	}
}

// TestSparDLScheduleReducesEveryBlock plays the schedule with sets of contributors: after
// the last round worker r holds block r with every worker's contribution exactly once,
// and the run each worker sends lies within the blocks it still holds.
func TestSparDLScheduleReducesEveryBlock(t *testing.T) {
	for p := 1; p <= 17; p++ {
		rounds := spardlSchedule(p)
		if want := int(math.Ceil(math.Log2(float64(p)))); len(rounds) != want {
			t.Errorf("P=%d: %d rounds, want ceil(log2 P) = %d", p, len(rounds), want)
		}
		// have[w][b][c]: worker w holds worker c's contribution to block b.
		have := make([][][]int, p)
		for w := range p {
			have[w] = make([][]int, p)
			for b := range p {
				have[w][b] = make([]int, p)
				have[w][b][w] = 1
			}
		}
		holds := p // worker w holds blocks [w, w+holds)
		for i, rd := range rounds {
			if rd.gap+rd.run > holds || rd.run > rd.gap {
				t.Fatalf("P=%d, round %d: sends blocks [+%d, +%d) of the %d it holds", p, i, rd.gap, rd.gap+rd.run, holds)
			}
			next := make([][][]int, p)
			for w := range p {
				next[w] = make([][]int, p)
				for b := range p {
					next[w][b] = append([]int(nil), have[w][b]...)
				}
				from := (w - rd.gap + p) % p
				for j := range rd.run {
					b := (w + j) % p
					for c := range p {
						next[w][b][c] += have[from][b][c]
					}
				}
			}
			have, holds = next, rd.gap
		}
		if holds != 1 && p > 1 {
			t.Errorf("P=%d: a worker still holds %d blocks after the last round", p, holds)
		}
		for w := range p {
			for c, n := range have[w][w] {
				if n != 1 {
					t.Fatalf("P=%d: worker %d's block holds worker %d's contribution %d times", p, w, c, n)
				}
			}
		}
		if got := spardlContributions(rounds, p)[0]; got != p {
			t.Errorf("P=%d: the contribution count of a worker's own block ends at %d", p, got)
		}
	}
}

// TestSparDLFirstStep: with one round (two workers) the result is, for every block, the
// top k_b of the sums of both workers' top k_b, averaged.
func TestSparDLFirstStep(t *testing.T) {
	sizes := []int{700, 5, 1300}
	grads := pipelinetest.Normal(sizes, nil)
	const world, n = 2, 2005
	const density = 0.02
	res, err := pipelinetest.Run(world, sizes, nil, 1, grads, sparDLFactory(compress.Config{Density: density}))
	if err != nil {
		t.Fatal(err)
	}
	bounds := evenBounds(n, world)
	want := make([]float64, n)
	for b := range world {
		lo, hi := bounds[b], bounds[b+1]
		k := compress.KFor(hi-lo, density)
		sums := make([]float64, hi-lo)
		for r := range world {
			var flat []float64
			for _, g := range grads(r, 0) {
				for _, v := range g {
					flat = append(flat, float64(v))
				}
			}
			for _, i := range topKOf(flat[lo:hi], k) {
				sums[i] += flat[lo+i]
			}
		}
		for _, i := range topKOf(sums, k) {
			want[lo+i] = sums[i] / world
		}
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
}

// TestSparDLErrorFeedbackKeepsTheSum: the global residual collection loses nothing: over
// the steps, what every rank applied plus the mean of the ranks' residuals equals the
// mean of all the gradients, at worker counts with one, two and three rounds.
func TestSparDLErrorFeedbackKeepsTheSum(t *testing.T) {
	shapes := [][]int{{500}, {7}, {900}}
	grads := normalGrads(shapes)
	for _, world := range []int{2, 3, 5} {
		runs := runPipelines(t, world, 5, shapes, grads, sparDLFactory(compress.Config{Density: 0.03}), nil)
		for id := range shapes {
			got, want := appliedAndKept(t, runs, grads, id, true)
			if e := relErr(got, want); e > 1e-4 {
				t.Errorf("P=%d, tensor %d: applied plus residual is %.2g away from the sum of the gradients", world, id, e)
			}
		}
	}
}

// TestSparDLRanksAgree: every rank ends every step with bit-identical gradients, and
// sends about the target density.
func TestSparDLRanksAgree(t *testing.T) {
	sizes := []int{1000, 10, 3000, 33, 1}
	grads := scaled(sizes, 0.02)
	for _, world := range []int{3, 4, 6} {
		for _, cfg := range []compress.Config{{Density: 0.05}, {Density: 0.05, Momentum: 0.9, WarmupSteps: 3}} {
			res, err := pipelinetest.Run(world, sizes, nil, 8, grads, sparDLFactory(cfg))
			if err != nil {
				t.Fatal(err)
			}
			if err := pipelinetest.CheckRanksAgree(res); err != nil {
				t.Fatalf("P=%d %+v: %v", world, cfg, err)
			}
			if d := res[0].Metrics[7].DensityAchieved; math.Abs(d-0.05) > 0.005 {
				t.Errorf("P=%d %+v: density %v, want 0.05", world, cfg, d)
			}
		}
	}
}

// TestSparDLTrafficIsLinearInK: a worker sends at most k_b pairs a block a round and its
// block in the allgather, so its traffic grows with log P rounds, not with P as an
// allgather of everyone's top-k does.
func TestSparDLTrafficIsLinearInK(t *testing.T) {
	sizes := []int{20000, 100, 20000}
	grads := pipelinetest.Normal(sizes, nil)
	cfg := compress.Config{Density: 0.01}
	k := compress.KFor(40100, cfg.Density)
	for _, world := range []int{2, 4, 8} {
		res, err := pipelinetest.Run(world, sizes, nil, 2, grads, sparDLFactory(cfg))
		if err != nil {
			t.Fatal(err)
		}
		var sent float64
		for _, r := range res {
			sent += float64(r.Metrics[1].BytesSent)
		}
		sent /= float64(world)
		// Reduce-scatter: the rounds' runs add up to P-1 blocks of at most k/P pairs, plus
		// a count each; allgather: P-1 blocks of k/P pairs. Frame headers besides.
		bound := 2*8*float64(k)*float64(world-1)/float64(world) + 4*float64(world) + 64*float64(world)
		t.Logf("P=%d: SparDL sends %.0f bytes a step (%.2f pairs of k)", world, sent, sent/8/float64(k))
		if sent > bound {
			t.Errorf("P=%d: SparDL sends %.0f bytes a step, more than 2k pairs (%.0f)", world, sent, bound)
		}
	}
}

func TestSparDLResume(t *testing.T) {
	sizes := []int{3000, 16, 700, 5}
	grads := scaled(sizes, 0.1)
	for _, cfg := range []compress.Config{{Density: 0.02}, {Density: 0.02, Momentum: 0.9, WarmupSteps: 4}} {
		if err := pipelinetest.CheckResume(3, sizes, 6, 3, grads, sparDLFactory(cfg)); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	x, err := NewSparDL(inproc.New(1)[0], pipelinetest.Tensors(sizes), compress.Config{Density: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Restore(pipeline.State{Extra: []byte{1}}); err == nil || !strings.Contains(err.Error(), "another pipeline") {
		t.Errorf("restoring another pipeline's state: %v", err)
	}
}
