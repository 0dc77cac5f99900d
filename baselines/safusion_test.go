package baselines

import (
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipeline/pipelinetest"
	"github.com/ssfusion/ssfusion/pipelines"
)

// safusionFactory builds SAFusion pipelines; watch, when set, sees each rank's stage before
// the pipeline runs.
func safusionFactory(thresholdBytes int, cfg compress.Config, cost netmodel.Network, warmup int, watch func(rank int, s *saFusion), opts ...SAFusionOption) pipelinetest.Factory {
	var mu sync.Mutex
	return func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		f, s, err := newSAFusion(comm, tensors, thresholdBytes, cfg, cost, warmup, opts...)
		if err != nil {
			return nil, err
		}
		if watch != nil {
			mu.Lock()
			watch(comm.Rank(), s)
			mu.Unlock()
		}
		return f, nil
	}
}

// flatLink is a flat network of links of the given alpha and beta.
func flatLink(alpha, beta float64) netmodel.Network {
	return netmodel.Network{Inter: netmodel.Link{Alpha: alpha, Beta: beta}}
}

// Costs that make the plan predictable whatever the measured times: a start-up of an hour
// hides under nothing (one buffer), a near-free network under everything (one buffer per
// tensor, since every tensor takes some time to produce).
var (
	slowLink = flatLink(3600, 1e-9)
	freeLink = flatLink(0, 1e-300)
)

func TestPlanBuffers(t *testing.T) {
	// With alpha 1 s, beta 1/128 s/B and 2 workers a buffer of m bytes takes 1 + m/128
	// seconds: one 128-byte tensor 2 s, two 3 s, three 4 s.
	unit := flatLink(1, 1.0/128)
	timings := func(bytes, backward, sel []float64) []tensorTiming {
		ts := make([]tensorTiming, len(backward))
		for i := range ts {
			ts[i] = tensorTiming{Bytes: 128, Backward: backward[i]}
			if bytes != nil {
				ts[i].Bytes = bytes[i]
			}
			if sel != nil {
				ts[i].Select = sel[i]
			}
		}
		return ts
	}
	for _, tc := range []struct {
		name  string
		ts    []tensorTiming
		cost  netmodel.Network
		world int
		want  []int
	}{
		{"no tensors", nil, unit, 2, nil},
		{"one tensor", timings(nil, []float64{0}, nil), unit, 2, []int{1}},
		{
			// Ready at 0, 10, 20, 30. Every 2 s buffer finishes long before the next
			// tensor is ready: nothing to merge.
			"all hidden", timings(nil, []float64{0, 10, 10, 10}, nil), unit, 2, []int{1, 1, 1, 1},
		},
		{
			// Ready at 0, 1, 1.5, 2, 12, 22. Tensors 1-3 take 0.5+0.5+1 = 2 s to
			// produce, which hides under the first buffer's 2 s (equality counts):
			// they travel together; tensors 4 and 5 take 10 s each, more than the 4 s
			// and 2 s buffers before them.
			"merge what hides under the buffer before", timings(nil, []float64{0, 1, 0.5, 0.5, 10, 10}, nil), unit, 2, []int{1, 3, 1, 1},
		},
		{
			// Ready at 0, 5, 6, 7, 8, 9 (end 9). Step 1: tensor 4's 2 s exceed the 1 s
			// still to come, so 4 and 5 are the tail group. Step 2: tensor 1 (5 s)
			// alone, then 2 and 3 (2 s) under tensor 1's 2 s, then the tail (2 s)
			// under their 3 s. Step 3: the third buffer runs 7-10, past the end, and
			// only the tail follows it.
			"tail group from step 1", timings(nil, []float64{0, 5, 1, 1, 1, 1}, nil), unit, 2, []int{1, 1, 2, 2},
		},
		{
			// Ready at 0, 1, 4, 7, 10, 13; tensor 1 is 1280 bytes (11 s). Step 2 gives
			// [0] [1] [2 3 4] [5]: tensors 2-4 (9 s) hide under tensor 1's 11 s,
			// tensor 5 (3 s) under their 4 s. Step 3: tensor 1's buffer runs 2-13 and
			// ends with backward, so [2 3 4] and [5] merge into one last buffer.
			"tail merged once backward has run out",
			timings([]float64{128, 1280, 128, 128, 128, 128}, []float64{0, 1, 3, 3, 3, 3}, nil), unit, 2, []int{1, 1, 4},
		},
		{
			"start-up too large to hide anything",
			timings(nil, []float64{0, 1, 3, 3, 3, 3}, nil), flatLink(1e6, 1), 2, []int{6},
		},
		{
			// Ready at 1, 2.5, 4, 14: with 1 s of selection each, tensors 1 and 2 take
			// 1.5 s each, and only one of them hides under a 2 s buffer.
			"selection time counts",
			timings(nil, []float64{0, 0.5, 0.5, 10}, []float64{1, 1, 1, 0}), unit, 2, []int{1, 1, 1, 1},
		},
		{
			// The same without selection: tensors 1 and 2 (1 s) hide under the first
			// buffer.
			"selection time counts (none)", timings(nil, []float64{0, 0.5, 0.5, 10}, nil), unit, 2, []int{1, 2, 1},
		},
		{
			// Ready at 0, 1, 1.5, 2, 4.5, 14.5. On 2 workers: [0] [1 2 3] (2 s under
			// 2 s) [4] (2.5 s under 4 s) [5].
			"two workers", timings(nil, []float64{0, 1, 0.5, 0.5, 2.5, 10}, nil), unit, 2, []int{1, 3, 1, 1},
		},
		{
			// On 5 workers buffers cost four times as much: a tensor 8 s, so tensors
			// 1-4 (4.5 s) hide under the first buffer, and tensor 5 (10 s) under their
			// 20 s.
			"five workers", timings(nil, []float64{0, 1, 0.5, 0.5, 2.5, 10}, nil), unit, 5, []int{1, 4, 1},
		},
		{
			// Alone, communication is free: nothing waits, every tensor goes at once.
			"one worker", timings(nil, []float64{0, 1, 0.5, 0.5, 10, 10}, nil), unit, 1, []int{1, 1, 1, 1, 1, 1},
		},
		{
			// No time measured at all: nothing hides anything.
			"no backward time", timings(nil, []float64{0, 0, 0, 0}, nil), unit, 2, []int{4},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := planBuffers(tc.ts, tc.cost, tc.world); !slices.Equal(got, tc.want) {
				t.Errorf("planBuffers = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSAFusionAtDensityOneIsDense: sending every element gives the dense average, before
// and after the buffers are resized.
func TestSAFusionAtDensityOneIsDense(t *testing.T) {
	sizes := []int{300, 7, 1, 0, 2000, 64}
	grads := pipelinetest.Normal(sizes, nil)
	for _, threshold := range []int{4 * 100, 1 << 20} {
		for _, cost := range []netmodel.Network{{}, freeLink} {
			res, err := pipelinetest.Run(3, sizes, nil, 4, grads, safusionFactory(threshold, compress.Config{Density: 1, Selector: "topk"}, cost, 2, nil))
			if err != nil {
				t.Fatal(err)
			}
			if err := pipelinetest.CheckMean(res, grads, 1e-6); err != nil {
				t.Fatalf("threshold %d, cost %+v: %v", threshold, cost, err)
			}
			for r := range res {
				for s, m := range res[r].Metrics {
					if !m.HasDensity || m.DensityAchieved != 1 || m.TensorsMissing != 0 {
						t.Errorf("rank %d step %d metrics %+v, want density 1 and nothing missing", r, s, m)
					}
				}
			}
		}
	}
}

// TestSAFusionMatchesPerTensor: per-tensor selection and tensor-by-tensor averaging make
// the gradients independent of the buffers, so SAFusion must give per-tensor
// sparsification's gradients bit for bit, before the re-plan and after it, whatever the
// new plan.
func TestSAFusionMatchesPerTensor(t *testing.T) {
	sizes := []int{500, 3, 5000, 40, 7, 1200}
	grads := pipelinetest.Normal(sizes, []float32{1, 1e-3, 1, 1e-2, 1})
	configs := map[string]compress.Config{
		"plain": {Density: 0.02, Selector: "topk"},
		"dgc":   {Density: 0.02, Selector: "topk", Momentum: 0.9, WarmupSteps: 3},
	}
	const world, steps, warmup, threshold = 3, 6, 2, 4 * 600
	for cname, cfg := range configs {
		want, err := pipelinetest.Run(world, sizes, nil, steps, grads, sparseFactory("pertensor", threshold, cfg))
		if err != nil {
			t.Fatal(err)
		}
		for _, cost := range []netmodel.Network{{}, slowLink, freeLink} {
			got, err := pipelinetest.Run(world, sizes, nil, steps, grads, safusionFactory(threshold, cfg, cost, warmup, nil))
			if err != nil {
				t.Fatal(err)
			}
			if err := pipelinetest.CheckSame(got, want); err != nil {
				t.Fatalf("%s, cost %+v: differs from per-tensor at %v", cname, cost, err)
			}
			for r := range got {
				for s := range got[r].Grads {
					g, w := got[r].Metrics[s], want[r].Metrics[s]
					if g.DensityAchieved != w.DensityAchieved || g.TensorsMissing != w.TensorsMissing {
						t.Errorf("%s: rank %d step %d: density %g, missing %d; per-tensor %g, %d", cname, r, s, g.DensityAchieved, g.TensorsMissing, w.DensityAchieved, w.TensorsMissing)
					}
				}
			}
		}
	}
}

func bitsEqual(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// TestSAFusionRanksAgree: every rank ends each step with bit-identical gradients.
func TestSAFusionRanksAgree(t *testing.T) {
	sizes := []int{1000, 10, 3000, 33, 1}
	grads := pipelinetest.Normal(sizes, nil)
	res, err := pipelinetest.Run(4, sizes, nil, 5, grads, safusionFactory(4*1500, compress.Config{Density: 0.05, Selector: "topk"}, netmodel.Network{}, 2, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := pipelinetest.CheckRanksAgree(res); err != nil {
		t.Fatal(err)
	}
}

// shortSelector is exact top-k that returns fewer than k elements in some steps, as a
// sampled selector may: in steps where step+rank is odd it drops the last drop indices
// (all of them when k <= drop).
type shortSelector struct {
	inner                  compress.TopK
	rank, tensors, calls   int
	drop                   int
	extra                  bool // return one index too many instead (a broken selector)
	extraRank, extraAtCall int
}

func (s *shortSelector) Select(g []float32, k int, idx []int32) ([]int32, error) {
	step := s.calls / s.tensors
	call := s.calls
	s.calls++
	idx, err := s.inner.Select(g, k, idx)
	if err != nil {
		return idx, err
	}
	if s.extra {
		if s.rank == s.extraRank && call == s.extraAtCall && len(idx) > 0 {
			idx = append(idx, idx[len(idx)-1])
		}
		return idx, nil
	}
	if (step+s.rank)%2 == 1 {
		idx = idx[:max(0, len(idx)-s.drop)]
	}
	return idx, nil
}

// safusionModes are SAFusion with and without inter-worker alignment.
var safusionModes = []struct {
	name    string
	aligned bool
	opts    []SAFusionOption
}{
	{"aligned", true, nil},
	{"unaligned", false, []SAFusionOption{SAFusionUnaligned()}},
}

// gatherLog records, on every rank, what each allgather brought, per step and buffer:
// the buffer's tensors and the message lengths by sender.
type gatherLog struct {
	mu      sync.Mutex
	lengths map[[3]int][]int // rank, step, buffer
	ids     map[[3]int][]int
}

func (g *gatherLog) hook(rank int) func(step, buffer int, ids, lengths []int) {
	return func(step, buffer int, ids, lengths []int) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.lengths == nil {
			g.lengths, g.ids = map[[3]int][]int{}, map[[3]int][]int{}
		}
		key := [3]int{rank, step, buffer}
		g.lengths[key], g.ids[key] = lengths, ids
	}
}

// check reports whether every rank received equal lengths in every buffer of every step.
func (g *gatherLog) check(t *testing.T, world, steps int) {
	t.Helper()
	for r := range world {
		for s := range steps {
			buffers := 0
			for b := 0; ; b++ {
				lengths, ok := g.lengths[[3]int{r, s, b}]
				if !ok {
					break
				}
				buffers++
				if len(lengths) != world {
					t.Errorf("rank %d step %d buffer %d: %d messages, want %d", r, s, b, len(lengths), world)
				}
				for q := range lengths {
					if lengths[q] != lengths[0] {
						t.Errorf("rank %d step %d buffer %d: message lengths %v differ across ranks", r, s, b, lengths)
						break
					}
				}
			}
			if buffers == 0 {
				t.Errorf("rank %d step %d: no allgather seen", r, s)
			}
		}
	}
}

// checkLengths compares every message every rank received with want(sender, step, the
// buffer's tensors) and reports whether the messages of some buffer differed in length.
func (g *gatherLog) checkLengths(t *testing.T, world, steps int, want func(sender, step int, ids []int) int) (differed bool) {
	t.Helper()
	if len(g.lengths) < world*steps {
		t.Fatalf("%d allgathers seen, want at least one per rank and step (%d)", len(g.lengths), world*steps)
	}
	for key, lengths := range g.lengths {
		if len(lengths) != world {
			t.Errorf("rank %d step %d buffer %d: %d messages, want %d", key[0], key[1], key[2], len(lengths), world)
			continue
		}
		for q, n := range lengths {
			if w := want(q, key[1], g.ids[key]); n != w {
				t.Errorf("rank %d step %d buffer %d (tensors %v): rank %d's message has %d bytes, want %d", key[0], key[1], key[2], g.ids[key], q, n, w)
			}
			if n != lengths[0] {
				differed = true
			}
		}
	}
	return differed
}

// alignedLength is the length of an aligned message of tensors ids at density.
func alignedLength(sizes, ids []int, density float64) int {
	n := compress.SparseCountBytes
	for _, id := range ids {
		n += compress.SparseHeaderBytes + compress.SparsePairBytes*compress.KFor(sizes[id], density)
	}
	return n
}

// TestSAFusionShortSelections: when the selector returns fewer than k_i elements, and not
// as many on every rank, aligned SAFusion pads every rank's message of every buffer to the
// aligned length and unaligned SAFusion sends each rank's own pairs. In both modes every
// rank ends with the average of what each rank selected, neither the padding nor its
// absence changes the error-feedback memory, and density counts what was selected, not
// the padding, which only costs bytes.
func TestSAFusionShortSelections(t *testing.T) {
	sizes := []int{300, 2, 1000, 20, 1}
	grads := pipelinetest.Normal(sizes, nil)
	const world, steps, density = 3, 6, 0.05
	drop := func(rank int) int { return 1 + rank }
	order := []int{4, 3, 2, 1, 0} // pipelinetest.Run's: last first

	// The reference: each rank's error-fed top-k, shortened as the selector does, summed
	// in rank order in float32 as the scatter-average does, so results match bit for bit.
	residual := make([][][]float32, world)
	for r := range residual {
		residual[r] = make([][]float32, len(sizes))
		for i, n := range sizes {
			residual[r][i] = make([]float32, n)
		}
	}
	numel := 0
	for _, n := range sizes {
		numel += n
	}
	var sel compress.TopK
	padded := 0
	want := make([][][]float32, steps)      // step, tensor
	picked := make([][][]int, world)        // rank, step, tensor
	wantDensity := make([][]float64, world) // rank, step
	wantMissing := make([][]int, world)     // rank, step
	for r := range world {
		picked[r] = make([][]int, steps)
		wantDensity[r] = make([]float64, steps)
		wantMissing[r] = make([]int, steps)
	}
	for s := range steps {
		want[s] = make([][]float32, len(sizes))
		for i := range want[s] {
			want[s][i] = make([]float32, sizes[i])
		}
		for r := range world {
			g := grads(r, s)
			picked[r][s] = make([]int, len(sizes))
			total := 0
			for _, i := range order {
				acc := residual[r][i]
				for j := range acc {
					acc[j] += g[i][j]
				}
				k := compress.KFor(sizes[i], density)
				idx, err := sel.Select(acc, k, nil)
				if err != nil {
					t.Fatal(err)
				}
				if (s+r)%2 == 1 {
					idx = idx[:max(0, len(idx)-drop(r))]
				}
				padded += k - len(idx)
				picked[r][s][i] = len(idx)
				total += len(idx)
				wantMissing[r][s] += compress.Missing(sizes[i], len(idx))
				for _, j := range idx {
					want[s][i][j] += acc[j]
					acc[j] = 0
				}
			}
			wantDensity[r][s] = float64(total) / float64(numel)
		}
		for i := range want[s] {
			for j := range want[s][i] {
				want[s][i][j] /= world
			}
		}
	}
	if padded == 0 {
		t.Fatal("the selector never came short: the test tests nothing")
	}

	sent := map[string]int64{}
	for _, mode := range safusionModes {
		t.Run(mode.name, func(t *testing.T) {
			var log gatherLog
			stages := make([]*saFusion, world)
			watch := func(rank int, s *saFusion) {
				s.sel = &shortSelector{rank: rank, tensors: len(sizes), drop: drop(rank)}
				s.onGather = log.hook(rank)
				stages[rank] = s
			}
			cfg := compress.Config{Density: density, Selector: "topk"}
			res, err := pipelinetest.Run(world, sizes, nil, steps, grads, safusionFactory(4*400, cfg, netmodel.Network{}, 2, watch, mode.opts...))
			if err != nil {
				t.Fatal(err)
			}
			differed := log.checkLengths(t, world, steps, func(sender, step int, ids []int) int {
				if mode.aligned {
					return alignedLength(sizes, ids, density)
				}
				n := compress.SparseCountBytes
				for _, id := range ids {
					n += compress.SparseHeaderBytes + compress.SparsePairBytes*picked[sender][step][id]
				}
				return n
			})
			if differed == mode.aligned {
				t.Errorf("messages of different lengths in a buffer: %v, want %v", differed, !mode.aligned)
			}
			if err := pipelinetest.CheckRanksAgree(res); err != nil {
				t.Fatal(err)
			}
			for r := range world {
				for s := range steps {
					m := res[r].Metrics[s]
					if m.DensityAchieved != wantDensity[r][s] || m.TensorsMissing != wantMissing[r][s] {
						t.Errorf("rank %d step %d: density %g, %d missing; want %g, %d (padding is not selection)", r, s, m.DensityAchieved, m.TensorsMissing, wantDensity[r][s], wantMissing[r][s])
					}
					for i := range sizes {
						if !bitsEqual(res[r].Grads[s][i], want[s][i]) {
							t.Fatalf("rank %d step %d tensor %d: %v, want %v", r, s, i, res[r].Grads[s][i], want[s][i])
						}
					}
				}
				sent[mode.name] += res[r].Stats.BytesSent
			}
			for r, st := range stages {
				for i := range sizes {
					if !bitsEqual(st.Memory().Residual(i), residual[r][i]) {
						t.Errorf("rank %d tensor %d: residual %v, want %v (padding must not clear memory)", r, i, st.Memory().Residual(i), residual[r][i])
					}
				}
			}
		})
	}
	if sent["unaligned"] >= sent["aligned"] {
		t.Errorf("the ranks sent %d bytes unaligned, %d aligned: want fewer without the padding", sent["unaligned"], sent["aligned"])
	}
}

// TestSAFusionAlignmentSampledSelectors: with the selectors whose counts vary between
// ranks (dgc on tensors of 128K elements or more, gaussiank), given different gradients
// on every rank, aligned messages all have the aligned length and unaligned ones each
// rank's own count, as its density reports it. Both modes give every rank per-tensor
// sparsification's gradients, bit for bit, since padding adds zeros, and the unaligned mode
// sends fewer bytes.
func TestSAFusionAlignmentSampledSelectors(t *testing.T) {
	for _, tc := range []struct {
		selector string
		sizes    []int
		density  float64
		steps    int
		seed     uint64 // dgc comes short in about 2% of its selections; with this seed, twice
	}{
		{"dgc", []int{200000, 300, 150000, 10}, 0.02, 6, 5},
		{"gaussiank", []int{5000, 300, 20000, 10}, 0.01, 6, 7},
	} {
		t.Run(tc.selector, func(t *testing.T) {
			const world = 3
			grads := pipelinetest.Normal(tc.sizes, nil)
			cfg := compress.Config{Density: tc.density, Selector: tc.selector, Seed: tc.seed}
			numel, aligned := 0, alignedLength(tc.sizes, []int{0, 1, 2, 3}, tc.density)
			for _, n := range tc.sizes {
				numel += n
			}
			perTensor, err := pipelinetest.Run(world, tc.sizes, nil, tc.steps, grads, sparseFactory("pertensor", 1<<30, cfg))
			if err != nil {
				t.Fatal(err)
			}
			sent := map[string]int64{}
			for _, mode := range safusionModes {
				var log gatherLog
				// One buffer in every step: a threshold above the whole gradient, then a
				// start-up that nothing hides. A message's length then follows from the
				// density its sender reports.
				res, err := pipelinetest.Run(world, tc.sizes, nil, tc.steps, grads,
					safusionFactory(1<<30, cfg, slowLink, 2, func(rank int, s *saFusion) { s.onGather = log.hook(rank) }, mode.opts...))
				if err != nil {
					t.Fatalf("%s: %v", mode.name, err)
				}
				short := 0
				differed := log.checkLengths(t, world, tc.steps, func(sender, step int, ids []int) int {
					if len(ids) != len(tc.sizes) {
						t.Fatalf("%s: step %d has a buffer of tensors %v, want all in one", mode.name, step, ids)
					}
					picked := int(math.Round(res[sender].Metrics[step].DensityAchieved * float64(numel)))
					own := compress.SparseCountBytes + len(tc.sizes)*compress.SparseHeaderBytes + compress.SparsePairBytes*picked
					if own < aligned {
						short++
					}
					if mode.aligned {
						return aligned
					}
					return own
				})
				if short == 0 {
					t.Fatalf("%s: the selector never came short: the test tests nothing", mode.name)
				}
				if differed == mode.aligned {
					t.Errorf("%s: messages of different lengths in a buffer: %v, want %v", mode.name, differed, !mode.aligned)
				}
				if err := pipelinetest.CheckSame(res, perTensor); err != nil {
					t.Errorf("%s: differs from per-tensor sparsification at %v", mode.name, err)
				}
				for r := range res {
					sent[mode.name] += res[r].Stats.BytesSent
				}
			}
			if sent["unaligned"] >= sent["aligned"] {
				t.Errorf("the ranks sent %d bytes unaligned, %d aligned: want fewer without the padding", sent["unaligned"], sent["aligned"])
			}
		})
	}
}

// TestSAFusionRejectsMisalignedChunk: a rank whose message is not the aligned length, or
// without alignment is longer (here its selector returns one index too many), is reported,
// by name, on every rank.
func TestSAFusionRejectsMisalignedChunk(t *testing.T) {
	sizes := []int{100, 50}
	grads := pipelinetest.Normal(sizes, nil)
	watch := func(rank int, s *saFusion) {
		s.sel = &shortSelector{rank: rank, tensors: len(sizes), extra: true, extraRank: 1, extraAtCall: 3}
	}
	for _, mode := range safusionModes {
		_, err := pipelinetest.Run(3, sizes, nil, 3, grads, safusionFactory(1<<20, compress.Config{Density: 0.1, Selector: "topk"}, netmodel.Network{}, 2, watch, mode.opts...))
		if err == nil || !strings.Contains(err.Error(), "rank 1 sent") {
			t.Errorf("%s: error %v, want one naming rank 1's message", mode.name, err)
		}
	}
}

// lateRank holds back rank late's first push of step step until rank 0 has issued that
// step's allgather, and then by d more: rank 0's allgather waits at least d for it.
type lateRank struct {
	pipeline.Pipeline
	comm         dist.Communicator
	rank0        func() dist.Communicator
	late, step   int
	d            time.Duration
	pushes, size int
}

func (p *lateRank) Push(id int, grad []float32) error {
	if p.comm.Rank() == p.late && p.pushes == p.step*p.size {
		// One allgather per step: the pipeline runs one buffer.
		for p.rank0().Stats().AllGatherV.Calls < int64(p.step+1) {
			time.Sleep(100 * time.Microsecond)
		}
		time.Sleep(p.d)
	}
	p.pushes++
	return p.Pipeline.Push(id, grad)
}

// TestSAFusionAllGatherTime: every step reports its time in the sparse allgathers, and it
// counts the time a rank waits there for a later one.
func TestSAFusionAllGatherTime(t *testing.T) {
	sizes := []int{2000, 30, 500}
	grads := pipelinetest.Normal(sizes, nil)
	const world, steps, lateStep, d = 2, 5, 3, 30 * time.Millisecond
	for _, mode := range safusionModes {
		var mu sync.Mutex
		comms := make([]dist.Communicator, world)
		inner := safusionFactory(1<<30, compress.Config{Density: 0.05, Selector: "gaussiank"}, slowLink, 2, nil, mode.opts...)
		factory := func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
			p, err := inner(comm, tensors)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			comms[comm.Rank()] = comm
			mu.Unlock()
			rank0 := func() dist.Communicator {
				mu.Lock()
				defer mu.Unlock()
				return comms[0]
			}
			return &lateRank{Pipeline: p, comm: comm, rank0: rank0, late: 1, step: lateStep, d: d, size: len(sizes)}, nil
		}
		res, err := pipelinetest.Run(world, sizes, nil, steps, grads, factory)
		if err != nil {
			t.Fatalf("%s: %v", mode.name, err)
		}
		for r := range world {
			for s, m := range res[r].Metrics {
				v, ok := m.Extra[SAFusionAllGatherMS]
				if !ok || !(v >= 0) {
					t.Errorf("%s: rank %d step %d: %s is %v (reported: %v)", mode.name, r, s, SAFusionAllGatherMS, v, ok)
				}
			}
		}
		if got, least := res[0].Metrics[lateStep].Extra[SAFusionAllGatherMS], float64(d)/float64(time.Millisecond); got < least {
			t.Errorf("%s: rank 0 waited at least %g ms for rank 1 in step %d, but reports %g ms in the allgathers", mode.name, least, lateStep, got)
		}
	}
}

// TestSAFusionReplansAfterWarmup: the buffers of the first warm-up steps come from the byte
// threshold; at the end of the last warm-up step every rank adopts the plan planBuffers
// makes from rank 0's timings.
func TestSAFusionReplansAfterWarmup(t *testing.T) {
	sizes := []int{500, 3, 5000, 40, 7}
	grads := pipelinetest.Normal(sizes, nil)
	const world, steps, warmup, threshold = 3, 6, 3, 4 * 600
	// By the threshold, in backprop order 4 3 2 1 0: [4 3] [2] [1 0].
	const initial = 3
	for _, tc := range []struct {
		name string
		cost netmodel.Network
		want int // buffers after the warm-up; 0: whatever the planner says
	}{
		{"slow link", slowLink, 1},
		{"free link", freeLink, len(sizes)},
		{"default link", netmodel.Network{}, 0},
	} {
		var log gatherLog
		var mu sync.Mutex
		type replanned struct {
			timings []tensorTiming
			counts  []int
		}
		plans := make([][]replanned, world)
		stages := make([]*saFusion, world)
		watch := func(rank int, s *saFusion) {
			stages[rank] = s
			s.onGather = log.hook(rank)
			s.onReplan = func(ts []tensorTiming, counts []int) {
				mu.Lock()
				defer mu.Unlock()
				plans[rank] = append(plans[rank], replanned{slices.Clone(ts), slices.Clone(counts)})
			}
		}
		cfg := compress.Config{Density: 0.05, Selector: "topk"}
		if _, err := pipelinetest.Run(world, sizes, nil, steps, grads, safusionFactory(threshold, cfg, tc.cost, warmup, watch)); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		log.check(t, world, steps)
		for r := range world {
			if len(plans[r]) != 1 {
				t.Fatalf("%s: rank %d replanned %d times, want once", tc.name, r, len(plans[r]))
			}
			p := plans[r][0]
			if !slices.Equal(p.timings, plans[0][0].timings) {
				t.Errorf("%s: rank %d planned from timings %v, rank 0 from %v", tc.name, r, p.timings, plans[0][0].timings)
			}
			if want := planBuffers(p.timings, stages[r].net, world); !slices.Equal(p.counts, want) {
				t.Errorf("%s: rank %d planned %v, planBuffers says %v", tc.name, r, p.counts, want)
			}
			if p.timings[0].Backward != 0 {
				t.Errorf("%s: the first tensor's backward time is %g, want 0 (not observed)", tc.name, p.timings[0].Backward)
			}
			after := len(p.counts)
			if tc.want != 0 && after != tc.want {
				t.Errorf("%s: %d buffers after the warm-up, want %d", tc.name, after, tc.want)
			}
			for s := range steps {
				n := 0
				for log.lengths[[3]int{r, s, n}] != nil {
					n++
				}
				want := initial
				if s >= warmup {
					want = after
				}
				if n != want {
					t.Errorf("%s: rank %d step %d ran %d buffers, want %d", tc.name, r, s, n, want)
				}
			}
		}
	}
}

// sleepyPipe delays the push of one tensor on one rank: backward that takes long there.
type sleepyPipe struct {
	pipeline.Pipeline
	rank, before, myRank int
	d                    time.Duration
}

func (p sleepyPipe) Push(id int, grad []float32) error {
	if id == p.before && p.myRank == p.rank {
		time.Sleep(p.d)
	}
	return p.Pipeline.Push(id, grad)
}

// TestSAFusionTimesBackward: the time the model spends before a gradient is measured as
// that tensor's backward time, and every rank plans from rank 0's measurements.
func TestSAFusionTimesBackward(t *testing.T) {
	sizes := []int{100, 100, 100}
	grads := pipelinetest.Normal(sizes, nil)
	const d = 5 * time.Millisecond
	var mu sync.Mutex
	got := map[int][]tensorTiming{}
	inner := safusionFactory(1<<20, compress.Config{Density: 0.1, Selector: "topk"}, netmodel.Network{}, 2, func(rank int, s *saFusion) {
		s.onReplan = func(ts []tensorTiming, _ []int) {
			mu.Lock()
			defer mu.Unlock()
			got[rank] = slices.Clone(ts)
		}
	})
	factory := func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		p, err := inner(comm, tensors)
		if err != nil {
			return nil, err
		}
		// Backprop order 2 1 0: the model takes d before tensor 1's gradient on rank 0.
		return sleepyPipe{Pipeline: p, rank: 0, before: 1, myRank: comm.Rank(), d: d}, nil
	}
	if _, err := pipelinetest.Run(2, sizes, nil, 3, grads, factory); err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		ts := got[r]
		if len(ts) != 3 {
			t.Fatalf("rank %d: timings %v", r, ts)
		}
		// ts is in backprop order: tensors 2, 1, 0.
		if ts[1].Backward < d.Seconds() {
			t.Errorf("rank %d: tensor 1's backward time %g s, want at least %g s (rank 0's)", r, ts[1].Backward, d.Seconds())
		}
		if ts[0].Backward != 0 {
			t.Errorf("rank %d: the first tensor's backward time %g s, want 0 (not observed)", r, ts[0].Backward)
		}
		for i, x := range ts {
			if x.Select <= 0 {
				t.Errorf("rank %d: tensor position %d has selection time %g", r, i, x.Select)
			}
		}
	}
}

// TestSAFusionResume: a pipeline restored from a checkpoint continues bit for bit, whether
// the checkpoint was taken before or after the re-plan (the restored pipeline times its
// own warm-up and replans again), with alignment and without.
func TestSAFusionResume(t *testing.T) {
	sizes := []int{3000, 16, 700, 5}
	grads := pipelinetest.Normal(sizes, nil)
	configs := map[string]compress.Config{
		"plain":     {Density: 0.02, Selector: "topk"},
		"dgc":       {Density: 0.02, Selector: "topk", Momentum: 0.9, WarmupSteps: 4},
		"gaussiank": {Density: 0.02, Selector: "gaussiank"},
	}
	for _, mode := range safusionModes {
		for cname, cfg := range configs {
			for _, split := range []int{1, 3} {
				if err := pipelinetest.CheckResume(3, sizes, 6, split, grads, safusionFactory(4*1000, cfg, freeLink, 2, nil, mode.opts...)); err != nil {
					t.Errorf("%s, %s, split %d: %v", mode.name, cname, split, err)
				}
			}
		}
	}
}

// TestSAFusionAlignSetting: safusion-align reaches SAFusion through the registry (off, a
// selector that comes short sends fewer bytes for the same gradients, and the ranks still
// agree), and any other pipeline refuses it by name.
func TestSAFusionAlignSetting(t *testing.T) {
	sizes := []int{5000, 300, 20000, 10}
	grads := pipelinetest.Normal(sizes, nil)
	set := pipelines.DefaultSettings()
	set.Pipeline, set.Selector, set.FusionMB = "safusion", "gaussiank", 0.01
	results := map[bool][]pipelinetest.Result{}
	for _, align := range []bool{true, false} {
		s := set
		s.SAFusionAlign = align
		if err := pipelines.Check(s); err != nil {
			t.Fatalf("safusion-align %v: %v", align, err)
		}
		res, err := pipelinetest.Run(2, sizes, nil, 4, grads, pipelines.Factory(pipelines.Build{Settings: s, Seed: 1}))
		if err != nil {
			t.Fatalf("safusion-align %v: %v", align, err)
		}
		if err := pipelinetest.CheckRanksAgree(res); err != nil {
			t.Errorf("safusion-align %v: %v", align, err)
		}
		results[align] = res
	}
	if err := pipelinetest.CheckSame(results[false], results[true]); err != nil {
		t.Errorf("unaligned differs from aligned at %v", err)
	}
	if off, on := results[false][0].Stats.BytesSent, results[true][0].Stats.BytesSent; off >= on {
		t.Errorf("rank 0 sent %d bytes unaligned, %d aligned: the setting did not reach the pipeline", off, on)
	}
	for _, name := range []string{"pertensor", "omgs"} {
		s := set
		s.Pipeline, s.SAFusionAlign = name, false
		if err := pipelines.Check(s); err == nil || !strings.Contains(err.Error(), "safusion-align") {
			t.Errorf("%s with safusion-align off: error %v, want one naming safusion-align", name, err)
		}
	}
}

func TestSAFusionArgumentErrors(t *testing.T) {
	comm := inproc.New(1)[0]
	defer comm.Close()
	tensors := pipelinetest.Tensors([]int{10})
	good := compress.Config{Density: 0.1, Selector: "topk"}
	for _, tc := range []struct {
		name      string
		comm      dist.Communicator
		threshold int
		cfg       compress.Config
		cost      netmodel.Network
		warmup    int
	}{
		{"no communicator", nil, 1024, good, netmodel.Network{}, 0},
		{"zero threshold", comm, 0, good, netmodel.Network{}, 0},
		{"zero density", comm, 1024, compress.Config{Selector: "topk"}, netmodel.Network{}, 0},
		{"unknown selector", comm, 1024, compress.Config{Density: 0.1, Selector: "nope"}, netmodel.Network{}, 0},
		{"negative alpha", comm, 1024, good, flatLink(-1, 1e-9), 0},
		{"NaN beta", comm, 1024, good, flatLink(0, math.NaN()), 0},
		{"infinite alpha", comm, 1024, good, flatLink(math.Inf(1), 1e-9), 0},
		{"alpha without beta", comm, 1024, good, flatLink(1e-3, 0), 0},
		{"one warm-up step", comm, 1024, good, netmodel.Network{}, 1},
		{"negative warm-up", comm, 1024, good, netmodel.Network{}, -3},
	} {
		p, err := NewSAFusion(tc.comm, tensors, tc.threshold, tc.cfg, tc.cost, tc.warmup)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			p.Close()
		} else if p != nil {
			t.Errorf("%s: error %v with a non-nil pipeline", tc.name, err)
		}
	}
	_, s, err := newSAFusion(comm, tensors, 1024, good, netmodel.Network{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if s.timer.steps != DefaultSAFusionWarmup || s.net != flatLink(5.2e-4, 8.6e-10) {
		t.Errorf("defaults: warm-up %d, network %+v", s.timer.steps, s.net)
	}
}

// TestAlignedWireSize keeps the wire-format sizes SAFusion checks against in step with the
// encoder's.
func TestAlignedWireSize(t *testing.T) {
	tensors := pipelinetest.Tensors([]int{1000, 3, 0, 77})
	buf := newAlignedBuffer(tensors, []int{3, 1, 0, 2})
	for _, density := range []float64{0.001, 0.05, 0.5, 1} {
		for i := range buf.Parts {
			k := compress.KFor(len(tensors[buf.Parts[i].ID].Grad), density)
			buf.Parts[i].Indices = make([]int32, k)
			buf.Parts[i].Values = make([]float32, k)
		}
		if got, want := buf.wireSize(density), compress.SparseSize(buf.Parts); got != want {
			t.Errorf("density %g: aligned size %d, encoder's %d", density, got, want)
		}
	}
}
