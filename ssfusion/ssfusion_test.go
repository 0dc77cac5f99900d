package ssfusion

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ssfusion/ssfusion/baselines"
	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipeline/pipelinetest"
)

// variants are the four combinations of offloading and interleaving.
var variants = []struct {
	name                string
	offload, interleave bool
}{
	{"naive", false, false},
	{"offload", true, false},
	{"interleave", false, true},
	{"full", true, true},
}

func factory(thresholdBytes int, cfg Config) pipelinetest.Factory {
	return func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		return New(comm, tensors, thresholdBytes, cfg)
	}
}

func config(density float64, threshold int, offload, interleave bool) Config {
	return Config{
		Config:        compress.Config{Density: density, Selector: "topk"},
		Threshold:     threshold,
		Offload:       offload,
		SelectWorkers: 2,
		Interleave:    interleave,
	}
}

// TestDensityOneIsDense: at density 1 SSFusion must yield the dense average, whichever
// tensors it sparsifies.
func TestDensityOneIsDense(t *testing.T) {
	sizes := []int{300, 7, 1, 0, 2000, 64, 900}
	grads := pipelinetest.Normal(sizes, nil)
	for _, v := range variants {
		for _, threshold := range []int{0, 100, 1 << 30} {
			res, err := pipelinetest.Run(3, sizes, nil, 3, grads, factory(4*1000, config(1, threshold, v.offload, v.interleave)))
			if err != nil {
				t.Fatalf("%s: %v", v.name, err)
			}
			if err := pipelinetest.CheckMean(res, grads, 1e-6); err != nil {
				t.Fatalf("%s, threshold %d: %v", v.name, threshold, err)
			}
			for r := range res {
				for _, m := range res[r].Metrics {
					if m.DensityAchieved != 1 || m.TensorsMissing != 0 {
						t.Errorf("%s: metrics %+v, want density 1, nothing missing", v.name, m)
					}
				}
			}
		}
	}
}

// TestVariantsAgree: offloading and interleaving change when work happens, never the
// result, and every rank ends each step with bit-identical gradients.
func TestVariantsAgree(t *testing.T) {
	sizes := []int{5000, 10, 9000, 33, 1, 20000, 64}
	grads := pipelinetest.Normal(sizes, nil)
	var first []pipelinetest.Result
	for _, v := range variants {
		res, err := pipelinetest.Run(4, sizes, nil, 5, grads, factory(4*12000, config(0.01, 1000, v.offload, v.interleave)))
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		if first == nil {
			first = res
		}
		for r := range res {
			for s := range res[r].Grads {
				for i := range sizes {
					if !slices.Equal(res[r].Grads[s][i], first[0].Grads[s][i]) {
						t.Fatalf("%s: rank %d differs from the naive variant's rank 0 in step %d, tensor %d", v.name, r, s, i)
					}
				}
				if m := res[r].Metrics[s]; m.TensorsMissing != 0 {
					t.Errorf("%s: %d tensors missing", v.name, m.TensorsMissing)
				}
			}
		}
	}
}

// TestSelectiveSparsification: small tensors travel dense and arrive exactly averaged;
// large ones are sparsified to their own k, so none goes missing where multi-tensor
// sparsification loses the small-gradient ones.
func TestSelectiveSparsification(t *testing.T) {
	sizes := []int{4000, 16, 4000, 16, 4000, 9000}
	scale := []float32{1, 1e-3, 1, 1e-3, 1, 1e-3}
	grads := pipelinetest.Normal(sizes, scale)
	const world, density = 2, 0.01
	res, err := pipelinetest.Run(world, sizes, nil, 3, grads, factory(1<<20, config(density, 1000, true, true)))
	if err != nil {
		t.Fatal(err)
	}
	multi, err := pipelinetest.Run(world, sizes, nil, 3, grads, func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		return baselines.NewMultiTensor(comm, tensors, 1<<20, compress.Config{Density: density, Selector: "topk"})
	})
	if err != nil {
		t.Fatal(err)
	}
	for s := range 3 {
		want := pipelinetest.Mean(world, s, grads)
		for _, dense := range []int{1, 3} {
			for j, w := range want[dense] {
				if got := res[0].Grads[s][dense][j]; math.Abs(float64(got)-w) > 1e-9 {
					t.Fatalf("step %d: dense tensor %d[%d] = %g, want %g", s, dense, j, got, w)
				}
			}
		}
		for _, sparse := range []int{0, 2, 4, 5} {
			nonzero := 0
			for _, v := range res[0].Grads[s][sparse] {
				if v != 0 {
					nonzero++
				}
			}
			if k := compress.KFor(sizes[sparse], density); nonzero == 0 || nonzero > world*k {
				t.Errorf("step %d: sparsified tensor %d has %d non-zero elements, want 1..%d", s, sparse, nonzero, world*k)
			}
		}
		m := res[0].Metrics[s]
		if m.TensorsMissing != 0 {
			t.Errorf("step %d: ssfusion missed %d tensors", s, m.TensorsMissing)
		}
		if multi[0].Metrics[s].TensorsMissing == 0 {
			t.Errorf("step %d: multi-tensor missed no tensor with these gradients", s)
		}
		// Density counts the dense tensors whole: 32 dense elements plus each sparse k.
		sent := 32 + 3*compress.KFor(4000, density) + compress.KFor(9000, density)
		if want := float64(sent) / 21032; math.Abs(m.DensityAchieved-want) > 1e-12 {
			t.Errorf("step %d: density %g, want %g", s, m.DensityAchieved, want)
		}
	}
}

func TestNonFiniteStopsTheStep(t *testing.T) {
	sizes := []int{5000, 100, 5000}
	grads := func(rank, step int) [][]float32 {
		g := pipelinetest.Normal(sizes, nil)(rank, step)
		if step == 2 {
			g[2][9] = float32(math.Inf(1))
		}
		return g
	}
	for _, v := range variants {
		_, err := pipelinetest.Run(2, sizes, nil, 3, grads, factory(4*6000, config(0.01, 1000, v.offload, v.interleave)))
		var nf *compress.NonFiniteError
		if !errors.As(err, &nf) {
			t.Fatalf("%s: error %v, want a NonFiniteError", v.name, err)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	comm := inproc.New(1)[0]
	defer comm.Close()
	tensors := pipelinetest.Tensors([]int{10})
	for _, cfg := range []Config{
		config(0, 10, false, false),
		config(0.1, -1, false, false),
		{Config: compress.Config{Density: 0.1, Selector: "topk"}, Network: &netmodel.Network{Inter: netmodel.Link{Beta: -1}}},
		{Config: compress.Config{Density: 0.1, Selector: "topk"}, SelectPerElement: -1},
		{Config: compress.Config{Density: 0.1, Selector: "bogus"}},
		{Config: compress.Config{Density: 0.1, Selector: "topk"}, Rule: ByCost},
		{Config: compress.Config{Density: 0.1, Selector: "topk"}, Rule: Rule(3)},
		{Config: compress.Config{Density: 0.1, Selector: "topk"}, Rule: -1},
		{Config: compress.Config{Density: 0.1, Selector: "topk", Momentum: 0.9, NoErrorFeedback: true}},
	} {
		if _, err := New(comm, tensors, 1024, cfg); err == nil {
			t.Errorf("accepted %+v", cfg)
		}
	}
}

func TestSchedule(t *testing.T) {
	has := func(bs ...int) func(int) bool { return func(b int) bool { return slices.Contains(bs, b) } }
	str := func(cs []collective) string {
		s := ""
		for _, c := range cs {
			if c.sparse {
				s += "S"
			} else {
				s += "D"
			}
			s += string(rune('0' + c.bucket))
		}
		return s
	}
	for _, tc := range []struct {
		buckets       int
		dense, sparse []int
		interleave    bool
		want          string
	}{
		{3, []int{0, 1, 2}, []int{0, 1, 2}, false, "D0S0D1S1D2S2"},
		{3, []int{0, 1, 2}, []int{0, 1, 2}, true, "D0D1S0D2S1S2"},
		{3, []int{0, 2}, []int{1, 2}, true, "D0D2S1S2"},
		{1, []int{0}, []int{0}, true, "D0S0"},
		{2, nil, []int{0, 1}, true, "S0S1"},
		{0, nil, nil, true, ""},
	} {
		if got := str(schedule(tc.buckets, has(tc.dense...), has(tc.sparse...), tc.interleave)); got != tc.want {
			t.Errorf("%d buckets, dense %v, sparse %v, interleave %v: %s, want %s", tc.buckets, tc.dense, tc.sparse, tc.interleave, got, tc.want)
		}
	}
}

func TestCandidates(t *testing.T) {
	// A classifier weight (2-D), a conv kernel (4-D), a bias (1-D), an embedding (2-D), a
	// tensor of unknown shape, an empty one, and sizes around the size rule's threshold.
	sizes := []int{8192, 8191, 10, 1_000_000, 8192, 0, 50, 20000}
	dims := []int{2, 4, 1, 2, 0, 1, 4, 1}
	for _, tc := range []struct {
		rule      Rule
		threshold int
		dims      []int
		want      []bool
	}{
		{BySize, 8192, dims, []bool{true, false, false, true, true, false, false, true}},
		{BySize, 0, dims, []bool{true, true, true, true, true, false, true, true}},
		{BySize, 8192, nil, []bool{true, false, false, true, true, false, false, true}},
		{ByRank, 8192, dims, []bool{false, true, true, false, true, false, true, true}},
		{ByRank, 1 << 30, dims, []bool{false, true, true, false, true, false, true, true}},
		{ByRank, 8192, nil, []bool{true, true, true, true, true, false, true, true}}, // unknown: not 2-D
		{ByRank, 8192, dims[:2], []bool{false, true, true, true, true, false, true, true}},
		{ByCost, 8192, dims, []bool{true, true, true, true, true, false, true, true}},
		{ByCost, 1 << 30, nil, []bool{true, true, true, true, true, false, true, true}},
	} {
		if got := Candidates(tc.rule, sizes, tc.dims, tc.threshold); !slices.Equal(got, tc.want) {
			t.Errorf("%v rule, threshold %d, dims %v: %v, want %v", tc.rule, tc.threshold, tc.dims, got, tc.want)
		}
	}
}

// TestSentDensity: a dense tensor sends all its elements, a sparsified one KFor of them (at
// least one), and the fraction is over the model's elements.
func TestSentDensity(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sizes     []int
		threshold int
		density   float64
		want      float64
	}{
		{"all dense", []int{10, 20}, 100, 0.01, 1},
		{"all sparse", []int{10000, 20000}, 100, 0.01, 300.0 / 30000},
		{"mixed", []int{100, 10000}, 1000, 0.01, (100 + 100.0) / 10100},
		{"at least one element", []int{50, 50}, 10, 0.01, 2.0 / 100},
		{"empty model", nil, 10, 0.01, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SentDensity(BySize, tc.sizes, nil, tc.threshold, tc.density); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseRule(t *testing.T) {
	for _, name := range RuleNames() {
		r, err := ParseRule(name)
		if err != nil || r.String() != name {
			t.Errorf("ParseRule(%q) = %v, %v", name, r, err)
		}
	}
	if RuleNames()[0] != "size" || Rule(0) != BySize {
		t.Errorf("the default rule is %q, want size", RuleNames()[0])
	}
	if _, err := ParseRule("Size"); err == nil {
		t.Error("ParseRule accepted a misspelt name")
	}
	if got := Rule(7).String(); got != "Rule(7)" {
		t.Errorf("an unknown rule prints as %q", got)
	}
}

func TestChoose(t *testing.T) {
	sizes := []int{10, 8191, 8192, 10_000_000, 0}
	bySize := Candidates(BySize, sizes, nil, 8192)
	if got, want := Choose(bySize, sizes, 0.01, nil, 0, 8), []bool{false, false, true, true, false}; !slices.Equal(got, want) {
		t.Errorf("size rule: %v, want %v", got, want)
	}
	// On a 10 Gbit/s network (SAFusion's constants) with a cheap selector, sparsifying a
	// 40 MB buffer pays off; an expensive selector makes nothing worth sparsifying, and a
	// buffer of a few hundred KB is dominated by start-up costs, so the extra allgather
	// does not pay.
	tenGbit := &netmodel.Network{Inter: netmodel.Link{Alpha: 5.2e-4, Beta: 8.6e-10}}
	const cheap, slow = 1e-9, 1e-6
	if got, want := Choose(bySize, sizes, 0.01, tenGbit, cheap, 8), []bool{false, false, true, true, false}; !slices.Equal(got, want) {
		t.Errorf("10 Gbit/s, cheap selection: %v, want %v", got, want)
	}
	if got := Choose(bySize, sizes, 0.01, tenGbit, slow, 8); slices.Contains(got, true) {
		t.Errorf("slow selection still sparsifies: %v", got)
	}
	small := []int{10, 8192, 100000}
	if got := Choose(Candidates(BySize, small, nil, 8192), small, 0.01, tenGbit, cheap, 8); slices.Contains(got, true) {
		t.Errorf("a 433 KB buffer is split although start-up costs dominate: %v", got)
	}
	if got := Choose(bySize, sizes, 0.01, tenGbit, cheap, 1); !slices.Equal(got, []bool{false, false, true, true, false}) {
		t.Errorf("one rank: the cost model has nothing to weigh, want the size rule, got %v", got)
	}
	// The cost rule hands every tensor to the cost model: at 10 Gbit/s and a cheap
	// selector it also sparsifies the 8191 elements the size rule keeps dense, but keeps
	// a one-element tensor dense, whose pair costs more than its dense share.
	sizes[0] = 1
	if got, want := Choose(Candidates(ByCost, sizes, nil, 8192), sizes, 0.01, tenGbit, cheap, 8), []bool{false, true, true, true, false}; !slices.Equal(got, want) {
		t.Errorf("cost rule at 10 Gbit/s: %v, want %v", got, want)
	}
	if got := Choose([]bool{true}, sizes, 0.01, nil, 0, 8); !slices.Equal(got, []bool{true, false, false, false, false}) {
		t.Errorf("candidates shorter than the buffer: %v", got)
	}
}

// TestRankRule: under the rank rule, 2-D tensors travel dense and arrive exactly
// averaged while every other tensor, however small, is sparsified to its own k, whatever
// the size threshold and the network say.
func TestRankRule(t *testing.T) {
	sizes := []int{4000, 16, 20000, 10, 9000}
	dims := []int{2, 1, 4, 1, 2}
	grads := pipelinetest.Normal(sizes, nil)
	const world, density = 2, 0.01
	cfg := config(density, 8192, true, true)
	cfg.Rule = ByRank
	// A network on which the cost model would keep everything dense.
	cfg.Network, cfg.SelectPerElement = &netmodel.Network{Inter: netmodel.Link{Alpha: 1, Beta: 1e-12}}, 1
	withDims := func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		for i := range tensors {
			tensors[i].Dims = dims[i]
		}
		return New(comm, tensors, 1<<20, cfg)
	}
	res, err := pipelinetest.Run(world, sizes, nil, 3, grads, withDims)
	if err != nil {
		t.Fatal(err)
	}
	if err := pipelinetest.CheckRanksAgree(res); err != nil {
		t.Fatal(err)
	}
	for s := range 3 {
		want := pipelinetest.Mean(world, s, grads)
		for i, d := range dims {
			got := res[0].Grads[s][i]
			if d == 2 {
				for j, w := range want[i] {
					if math.Abs(float64(got[j])-w) > 1e-6 {
						t.Fatalf("step %d: 2-D tensor %d[%d] = %g, want the dense mean %g", s, i, j, got[j], w)
					}
				}
				continue
			}
			nonzero := 0
			for _, v := range got {
				if v != 0 {
					nonzero++
				}
			}
			if k := compress.KFor(sizes[i], density); nonzero == 0 || nonzero > world*k {
				t.Errorf("step %d: %d-D tensor %d has %d non-zero elements, want 1..%d", s, d, i, nonzero, world*k)
			}
		}
	}
}

// TestNoErrorFeedback: without error feedback a step's aggregate depends on its own
// gradients alone, so the third step of a run equals a fresh run's first on the same
// gradients, for every variant.
func TestNoErrorFeedback(t *testing.T) {
	sizes := []int{5000, 10, 9000, 33, 1, 20000, 64}
	grads := pipelinetest.Normal(sizes, nil)
	later := func(rank, step int) [][]float32 { return grads(rank, step+2) }
	for _, v := range variants {
		cfg := config(0.01, 1000, v.offload, v.interleave)
		cfg.NoErrorFeedback = true
		long, err := pipelinetest.Run(3, sizes, nil, 3, grads, factory(4*12000, cfg))
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		fresh, err := pipelinetest.Run(3, sizes, nil, 1, later, factory(4*12000, cfg))
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		for i := range sizes {
			if !slices.Equal(long[0].Grads[2][i], fresh[0].Grads[0][i]) {
				t.Fatalf("%s: tensor %d of the third step differs from a fresh first step", v.name, i)
			}
		}
	}
}

// TestResume: every variant restored from a checkpoint of its state continues exactly as
// one that never stopped, the sparsified tensors' residuals and momenta included.
func TestResume(t *testing.T) {
	sizes := []int{3000, 16, 700, 5, 1200}
	grads := pipelinetest.Normal(sizes, nil)
	for _, v := range variants {
		cfg := config(0.02, 600, v.offload, v.interleave)
		cfg.Momentum, cfg.WarmupSteps = 0.9, 4
		if err := pipelinetest.CheckResume(3, sizes, 6, 3, grads, factory(4*2000, cfg)); err != nil {
			t.Errorf("%s: %v", v.name, err)
		}
	}
}

// TestChooseOnAFlatRingIsTheFormula: on a flat ring network, Choose decides as the rule
// written out in the alpha-beta formulas does, start-ups left out of the per-tensor
// comparison, for random buffers, links, selection costs and scales.
func TestChooseOnAFlatRingIsTheFormula(t *testing.T) {
	formula := func(sizes []int, threshold int, density, alpha, beta, sel float64, p int) []bool {
		P := float64(p)
		allReduce := func(m float64) float64 { return 2*(P-1)*alpha + 2*(P-1)/P*m*beta }
		allGather := func(m float64) float64 { return (P-1)*alpha + (P-1)*m*beta }
		sparse := make([]bool, len(sizes))
		var total, dense, pairs, selectTime float64
		any := false
		for i, n := range sizes {
			sparse[i] = n >= threshold && n > 0
			bytes := 4 * float64(n)
			total += bytes
			k := float64(compress.KFor(n, density))
			if sparse[i] && sel*float64(n)+(P-1)*8*k*beta >= 2*(P-1)/P*bytes*beta {
				sparse[i] = false
			}
			if sparse[i] {
				any, pairs, selectTime = true, pairs+8*k, selectTime+sel*float64(n)
			} else {
				dense += bytes
			}
		}
		if !any {
			return sparse
		}
		split := selectTime + allGather(pairs)
		if dense > 0 {
			split += allReduce(dense)
		}
		if split >= allReduce(total) {
			clear(sparse)
		}
		return sparse
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		sizes := make([]int, 1+rng.IntN(6))
		for i := range sizes {
			sizes[i] = int(math.Exp(rng.Float64() * math.Log(3e7)))
		}
		alpha := []float64{0, 5e-6, 5.2e-4}[rng.IntN(3)]
		beta := 8 / math.Exp(math.Log(1e7)+rng.Float64()*math.Log(1e5)) // 10 Mbit/s to 1 Tbit/s
		sel := rng.Float64() * 1e-8
		p := 2 + rng.IntN(255)
		density := []float64{0.001, 0.01, 0.1}[rng.IntN(3)]
		net := &netmodel.Network{Inter: netmodel.Link{Alpha: alpha, Beta: beta}}
		got := Choose(Candidates(BySize, sizes, nil, 8192), sizes, density, net, sel, p)
		if want := formula(sizes, 8192, density, alpha, beta, sel, p); !slices.Equal(got, want) {
			t.Errorf("sizes %v, density %g, alpha %g, beta %g, selection %g s, %d ranks: %v, the formula says %v", sizes, density, alpha, beta, sel, p, got, want)
		}
	}
}

// TestMomentumCorrectionReachesDenseTensors: under momentum correction the optimizer runs
// without momentum, so the tensors SSFusion keeps dense must come out with momentum
// applied: the average of the workers' u = momentum*u + g, the momentum of the averaged
// gradients.
func TestMomentumCorrectionReachesDenseTensors(t *testing.T) {
	sizes := []int{300, 7, 64, 900} // all below the threshold: every tensor stays dense
	grads := pipelinetest.Normal(sizes, nil)
	const world, steps, mu = 3, 4, 0.9
	for _, v := range variants {
		cfg := config(0.1, 1<<20, v.offload, v.interleave)
		cfg.Momentum = mu
		res, err := pipelinetest.Run(world, sizes, nil, steps, grads, factory(4*1000, cfg))
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		u := make([][]float64, len(sizes))
		for i, n := range sizes {
			u[i] = make([]float64, n)
		}
		for s := range steps {
			mean := pipelinetest.Mean(world, s, grads)
			for i := range sizes {
				for j := range u[i] {
					u[i][j] = mu*u[i][j] + mean[i][j]
					if got := res[0].Grads[s][i][j]; math.Abs(float64(got)-u[i][j]) > 1e-5 {
						t.Fatalf("%s, step %d, tensor %d[%d]: %g, want the momentum %g", v.name, s, i, j, got, u[i][j])
					}
				}
			}
		}
		if err := pipelinetest.CheckRanksAgree(res); err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
	}
}

// TestMatchesTopKReference compares SSFusion's aggregates with a direct computation: the
// tensors it sparsifies each select their own top k of the error-fed gradient, as
// per-tensor sparsification does, and the others arrive as the exact average. With a
// threshold of 0 no tensor stays dense, and SSFusion is per-tensor sparsification.
func TestMatchesTopKReference(t *testing.T) {
	sizes := []int{4000, 16, 3000, 9, 5000}
	grads := pipelinetest.Normal(sizes, []float32{1, 10, 0.1, 1, 1})
	const world, steps, density = 3, 4, 0.01
	for _, tc := range []struct {
		name      string
		threshold int
		sparse    [][]int
	}{
		{"none dense", 0, [][]int{{0}, {1}, {2}, {3}, {4}}},
		{"small ones dense", 1000, [][]int{{0}, {2}, {4}}},
	} {
		for _, v := range variants {
			for _, feedback := range []bool{true, false} {
				cfg := config(density, tc.threshold, v.offload, v.interleave)
				cfg.NoErrorFeedback = !feedback
				res, err := pipelinetest.Run(world, sizes, nil, steps, grads, factory(4*5000, cfg))
				if err != nil {
					t.Fatal(err)
				}
				want := pipelinetest.TopKReference(world, steps, sizes, grads, tc.sparse, density, feedback)
				if err := pipelinetest.CheckReference(res, want, 1e-6); err != nil {
					t.Errorf("%s, %s, error feedback %v: %v", tc.name, v.name, feedback, err)
				}
			}
		}
	}
}

// TestThresholdZeroIsPerTensor: with no tensor kept dense SSFusion selects every tensor on
// its own, as per-tensor sparsification does, so it must give per-tensor's gradients bit
// for bit in every variant, with error feedback and DGC's momentum correction and warm-up
// alike (docs/training.md says it trains so).
func TestThresholdZeroIsPerTensor(t *testing.T) {
	sizes := []int{4000, 16, 3000, 9, 5000, 640}
	grads := pipelinetest.Normal(sizes, []float32{1, 10, 0.1, 1, 1, 3})
	const world, steps, fusion = 3, 5, 4 * 5000
	for name, cc := range map[string]compress.Config{
		"plain": {Density: 0.01, Selector: "topk"},
		"dgc":   {Density: 0.01, Selector: "topk", Momentum: 0.9, WarmupSteps: 3},
	} {
		want, err := pipelinetest.Run(world, sizes, nil, steps, grads, func(c dist.Communicator, ts []pipeline.Tensor) (pipeline.Pipeline, error) {
			return baselines.NewPerTensor(c, ts, fusion, cc)
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range variants {
			cfg := config(cc.Density, 0, v.offload, v.interleave)
			cfg.Config = cc
			got, err := pipelinetest.Run(world, sizes, nil, steps, grads, factory(fusion, cfg))
			if err != nil {
				t.Fatal(err)
			}
			if err := pipelinetest.CheckSame(got, want); err != nil {
				t.Errorf("%s, %s: differs from per-tensor at %v", name, v.name, err)
			}
		}
	}
}
