package baselines

import (
	"bytes"
	"cmp"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipeline/pipelinetest"
)

// TestPlanMerges checks the merge plan against cases worked by hand. Four tensors of 100
// elements; an allgather costs 1 s plus 0.01 s per element, so merging two groups saves one
// second; selection is free unless said.
func TestPlanMerges(t *testing.T) {
	comm := func(elements, _ int) float64 { return 1 + 0.01*float64(elements) }
	sizes := []int{100, 100, 100, 100}
	for _, tc := range []struct {
		name      string
		backward  []float64
		selectSec float64
		want      []int
	}{
		// Tensor 1 comes 0.5 s after tensor 0: merging costs 0.5 s, saves 1 s. Tensor 2
		// comes 2 s later: it starts a group; the first group's allgather (3 s from 0.5 s)
		// still holds the link when tensor 2 is ready at 2.5 s, so waiting 1.5 s more for
		// tensor 3 costs only 0.5 s: merged.
		{"slack pays for a merge", []float64{0, 0.5, 2, 1.5}, 0, []int{2, 2}},
		// Tensor 3 2.5 s later costs 1.5 s beyond the slack: its own group.
		{"too late to merge", []float64{0, 0.5, 2, 2.5}, 0, []int{2, 1, 1}},
		{"all at once", []float64{0, 0, 0, 0}, 0, []int{4}},
		// Selection of the first group (200 elements at 5 ms: 1 s) delays backward, so
		// tensor 2 is ready at 3.5 s and its group's at 4 s (100 elements), while the first
		// group's allgather ends at 1.5 + 3 = 4.5 s: 0.5 s of slack, and tensor 3, 1.4 s
		// later, costs 0.9 s < 1 s: merged.
		{"selection delays backward", []float64{0, 0.5, 2, 1.4}, 0.005, []int{2, 2}},
		{"selection delays backward, later still", []float64{0, 0.5, 2, 1.6}, 0.005, []int{2, 1, 1}},
	} {
		if got := planMerges(tc.backward, sizes, tc.selectSec, comm); !slices.Equal(got, tc.want) {
			t.Errorf("%s: groups %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := planMerges([]float64{0}, []int{7}, 0, comm); !slices.Equal(got, []int{1}) {
		t.Errorf("one tensor: %v", got)
	}
	if got := planMerges(nil, nil, 0, comm); got != nil {
		t.Errorf("no tensors: %v", got)
	}
}

// OMGS-SGD re-plans its groups after the warm-up, every rank alike; error feedback loses
// nothing across the re-plan: what was applied plus the ranks' mean residual is the sum of
// the mean gradients.
func TestOMGSReplansAndKeepsResiduals(t *testing.T) {
	const world, steps, warmup = 2, 5, 2
	shapes := [][]int{{40, 30}, {8, 3, 3, 3}, {40}, {4, 4}, {300}}
	var plans [][]int
	cfg := compress.Config{Density: 0.1, Selector: "topk"}
	newPipe := func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		// A start-up of an hour merges everything into one group, whatever was measured.
		f, s, err := newOMGS(comm, tensors, 64, cfg, flatLink(3600, 1e-9), 3e-9, warmup)
		if err != nil {
			return nil, err
		}
		s.onReplan = func(_ []float64, counts []int) {
			if comm.Rank() == 0 {
				plans = append(plans, counts)
			}
		}
		return f, nil
	}
	grads := normalGrads(shapes)
	runs := runPipelines(t, world, steps, shapes, grads, newPipe, nil)
	if len(plans) != 1 || !slices.Equal(plans[0], []int{len(shapes)}) {
		t.Errorf("plans %v, want one plan of one group of %d tensors", plans, len(shapes))
	}
	for s := range steps {
		for id := range shapes {
			for j, v := range runs[0].Grads[s][id] {
				if math.Float32bits(v) != math.Float32bits(runs[1].Grads[s][id][j]) {
					t.Fatalf("step %d, tensor %d: the ranks differ", s, id)
				}
			}
		}
	}
	for id := range shapes {
		got, want := appliedAndKept(t, runs, grads, id, true)
		if e := relErr(got, want); e > 1e-4 {
			t.Errorf("tensor %v: applied plus residual is %.2g away from the sum of the gradients", shapes[id], e)
		}
	}
}

// TestOMGSMatchesTopKAcrossRegrouping compares OMGS-SGD, step by step, with a direct
// computation of top-k with error feedback over its groups: the warm-up's buffers until the
// re-plan, the merge plan after it. A residual the re-plan dropped, or moved to another
// element, would change a later step's selection or values. Both directions are checked:
// one warm-up buffer split into a group per tensor (what a link without start-up cost
// plans) and a buffer per tensor merged into one group.
func TestOMGSMatchesTopKAcrossRegrouping(t *testing.T) {
	sizes := []int{3000, 16, 700, 5, 240}
	grads := pipelinetest.Normal(sizes, []float32{1, 4, 0.5, 8, 2})
	const world, warmup, steps, density = 2, 3, 7, 0.05
	all := [][]int{{0, 1, 2, 3, 4}}
	each := [][]int{{0}, {1}, {2}, {3}, {4}}
	for _, tc := range []struct {
		name          string
		threshold     int
		net           netmodel.Network
		before, after [][]int
		plan          []int
	}{
		{"one buffer split", 1 << 20, freeLink, all, each, []int{1, 1, 1, 1, 1}},
		{"buffers merged", 4, slowLink, each, all, []int{5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := compress.Config{Density: density, Selector: "topk"}
			var plans [][]int
			res, err := pipelinetest.Run(world, sizes, nil, steps, grads, omgsFactory(tc.threshold, cfg, tc.net, warmup, &plans))
			if err != nil {
				t.Fatal(err)
			}
			if len(plans) != 1 || !slices.Equal(plans[0], tc.plan) {
				t.Fatalf("plans %v, want one plan %v", plans, tc.plan)
			}
			want := regroupedTopK(world, steps, sizes, grads, tc.before, tc.after, warmup, density)
			if err := pipelinetest.CheckReference(res, want, 1e-6); err != nil {
				t.Error(err)
			}
		})
	}
}

// regroupedTopK is pipelinetest.TopKReference for groups that change: steps before
// switchAt select within the groups before, later steps within after, and each rank's
// residual carries over element by element. Indexed by step, tensor and element.
func regroupedTopK(world, steps int, sizes []int, grads func(rank, step int) [][]float32, before, after [][]int, switchAt int, density float64) [][][]float64 {
	type element struct{ tensor, index int }
	residual := make([][][]float32, world)
	for r := range residual {
		residual[r] = make([][]float32, len(sizes))
		for i, n := range sizes {
			residual[r][i] = make([]float32, n)
		}
	}
	out := make([][][]float64, steps)
	for s := range steps {
		groups := before
		if s >= switchAt {
			groups = after
		}
		want := make([][]float64, len(sizes))
		for i, n := range sizes {
			want[i] = make([]float64, n)
		}
		for r := range world {
			acc := residual[r]
			for i, g := range grads(r, s) {
				for j, v := range g {
					acc[i][j] += v
				}
			}
			for _, group := range groups {
				var elems []element
				for _, id := range group {
					for j := range acc[id] {
						elems = append(elems, element{id, j})
					}
				}
				slices.SortStableFunc(elems, func(a, b element) int {
					return cmp.Compare(math.Abs(float64(acc[b.tensor][b.index])), math.Abs(float64(acc[a.tensor][a.index])))
				})
				for _, e := range elems[:compress.KFor(len(elems), density)] {
					want[e.tensor][e.index] += float64(acc[e.tensor][e.index]) / float64(world)
					acc[e.tensor][e.index] = 0
				}
			}
		}
		out[s] = want
	}
	return out
}

func TestNewOMGSRefusesBadSettings(t *testing.T) {
	tensors := psgdTensors(psgdShapes)
	good := compress.Config{Density: 0.1, Selector: "topk"}
	for _, tc := range []struct {
		name    string
		cfg     compress.Config
		net     netmodel.Network
		perElem float64
		warmup  int
		want    string
	}{
		{"one warm-up step", good, netmodel.Network{}, 3e-9, 1, "at least 2"},
		{"negative selection time", good, netmodel.Network{}, -1, 0, "selection time"},
		{"bad density", compress.Config{Density: 2, Selector: "topk"}, netmodel.Network{}, 3e-9, 0, "density"},
		{"bad network", good, flatLink(-1, 1), 3e-9, 0, "Alpha"},
	} {
		if _, err := NewOMGS(inproc.New(1)[0], tensors, 64, tc.cfg, tc.net, tc.perElem, tc.warmup); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// omgsFactory builds OMGS-SGD pipelines with selection at 3 ns an element; plans, when
// set, collects rank 0's merge plans.
func omgsFactory(thresholdBytes int, cfg compress.Config, net netmodel.Network, warmup int, plans *[][]int) pipelinetest.Factory {
	var mu sync.Mutex
	return func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		f, s, err := newOMGS(comm, tensors, thresholdBytes, cfg, net, 3e-9, warmup)
		if err != nil {
			return nil, err
		}
		if plans != nil && comm.Rank() == 0 {
			s.onReplan = func(_ []float64, counts []int) {
				mu.Lock()
				defer mu.Unlock()
				*plans = append(*plans, counts)
			}
		}
		return f, nil
	}
}

// TestOMGSResume: restored from a checkpoint, OMGS-SGD continues bit for bit, whether the
// checkpoint was taken after the first step, during the warm-up, right after the re-plan
// or later, which needs the warm-up's progress and the merge plan as well as the memory.
// Both networks make the plan independent of the measured times, and unlike the buffers
// the byte threshold gives (three): a slow link merges every tensor into one group, a
// free one gives each tensor its own.
func TestOMGSResume(t *testing.T) {
	sizes := []int{3000, 16, 700, 5, 240}
	grads := pipelinetest.Normal(sizes, []float32{1, 4, 0.5, 8, 2})
	const threshold, warmup, steps = 4 * 800, 3, 7
	plain := compress.Config{Density: 0.05, Selector: "topk"}
	dgc := compress.Config{Density: 0.05, Selector: "topk", Momentum: 0.9, WarmupSteps: 4}
	for _, tc := range []struct {
		name string
		net  netmodel.Network
		cfg  compress.Config
		plan []int
	}{
		{"slow link", slowLink, plain, []int{5}},
		{"free link", freeLink, plain, []int{1, 1, 1, 1, 1}},
		{"slow link, momentum and density warm-up", slowLink, dgc, []int{5}},
	} {
		var plans [][]int
		if _, err := pipelinetest.Run(2, sizes, nil, warmup, grads, omgsFactory(threshold, tc.cfg, tc.net, warmup, &plans)); err != nil {
			t.Fatal(err)
		}
		if len(plans) != 1 || !slices.Equal(plans[0], tc.plan) {
			t.Fatalf("%s: plans %v, want one plan %v", tc.name, plans, tc.plan)
		}
		for _, world := range []int{2, 4} {
			for _, split := range []int{1, 2, warmup, 5} {
				job := pipelinetest.Job{World: world, Sizes: sizes, Steps: steps, Grads: grads, New: omgsFactory(threshold, tc.cfg, tc.net, warmup, nil)}
				if err := job.CheckResume(split); err != nil {
					t.Errorf("%s, %d ranks, resumed at step %d: %v", tc.name, world, split, err)
				}
			}
		}
	}
}

// TestOMGSRestoreRefusesOtherSettings: a state saved with other tensors, at another world
// size or by another pipeline is refused with an error naming what differs, a damaged one
// with an error, never a panic, and a refused state leaves the pipeline as it was.
func TestOMGSRestoreRefusesOtherSettings(t *testing.T) {
	sizes := []int{3000, 16, 700, 5, 240}
	grads := pipelinetest.Normal(sizes, nil)
	cfg := compress.Config{Density: 0.05, Selector: "topk"}
	const warmup = 3
	newPipe := omgsFactory(4*800, cfg, slowLink, warmup, nil)
	saved, err := pipelinetest.Job{World: 2, Sizes: sizes, Steps: warmup + 1, Grads: grads, New: newPipe}.Run()
	if err != nil {
		t.Fatal(err)
	}
	cupcake, err := pipelinetest.Job{World: 2, Sizes: sizes, Steps: 2, Grads: grads, New: cupcakeFactory(cfg, 1, nil)}.Run()
	if err != nil {
		t.Fatal(err)
	}
	checkRestoreRefusals(t, saved[0].State, sizes, newPipe, []restoreCase{
		{"other world size", 4, sizes, nil, "2 ranks"},
		{"fewer tensors", 2, sizes[:4], nil, "5 tensors"},
		{"other tensor size", 2, []int{3000, 16, 600, 5, 240}, nil, "tensor 2"},
		{"Cupcake's state", 2, sizes, func(st *pipeline.State) { st.Extra = cupcake[0].State.Extra }, "OMGS-SGD"},
		{"no state of its own", 2, sizes, func(st *pipeline.State) { st.Extra = nil }, "merge plan"},
	})
}

// restoreCase is a state that a pipeline must refuse: the saved state, changed by edit,
// restored into a pipeline of world ranks over tensors of the given sizes.
type restoreCase struct {
	name  string
	world int
	sizes []int
	edit  func(*pipeline.State)
	want  string
}

// checkRestoreRefusals checks that every case is refused with an error saying what it
// wants, as is every truncation of the saved Extra, and that the refusals leave the
// pipeline fit to restore saved itself, which then gives saved back as its state.
func checkRestoreRefusals(t *testing.T, saved pipeline.State, sizes []int, newPipe pipelinetest.Factory, cases []restoreCase) {
	t.Helper()
	build := func(world int, sizes []int) pipeline.Stateful {
		comms := inproc.New(world)
		t.Cleanup(func() {
			for _, c := range comms {
				c.Close()
			}
		})
		p, err := newPipe(comms[0], pipelinetest.Tensors(sizes))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p.(pipeline.Stateful)
	}
	for _, tc := range cases {
		st := saved
		st.Extra = slices.Clone(saved.Extra)
		if tc.edit != nil {
			tc.edit(&st)
		}
		if err := build(tc.world, tc.sizes).Restore(st); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: restore gave %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	p := build(2, sizes)
	for n := range len(saved.Extra) {
		st := saved
		st.Extra = slices.Clone(saved.Extra[:n])
		if err := p.Restore(st); err == nil {
			t.Errorf("a state cut to %d of its %d bytes was accepted", n, len(saved.Extra))
		}
	}
	if err := p.Restore(saved); err != nil {
		t.Fatalf("the saved state itself, after the refusals: %v", err)
	}
	got, err := p.State()
	if err != nil {
		t.Fatal(err)
	}
	if got.Steps != saved.Steps || !slices.Equal(got.Order, saved.Order) || !bytes.Equal(got.Extra, saved.Extra) {
		t.Errorf("restored and taken again, the state is steps %d, order %v, %d bytes of its own; saved: %d, %v, %d bytes",
			got.Steps, got.Order, len(got.Extra), saved.Steps, saved.Order, len(saved.Extra))
	}
}

// TestOMGSStateCarriesTheWarmUp: a pipeline restored during the warm-up goes on from the
// saved progress and summed timings of every rank, so that it plans at the end of the same
// step as the uninterrupted run, from the timings of all the warm-up's timed steps.
func TestOMGSStateCarriesTheWarmUp(t *testing.T) {
	sizes := []int{3000, 16, 700, 5, 240}
	grads := pipelinetest.Normal(sizes, nil)
	cfg := compress.Config{Density: 0.05, Selector: "topk"}
	const world, warmup, split = 2, 4, 3
	var mu sync.Mutex
	stages := map[string][]*omgs{}
	factory := func(run string) pipelinetest.Factory {
		stages[run] = make([]*omgs, world)
		return func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
			f, s, err := newOMGS(comm, tensors, 4*800, cfg, slowLink, 3e-9, warmup)
			if err == nil {
				mu.Lock()
				stages[run][comm.Rank()] = s
				mu.Unlock()
			}
			return f, err
		}
	}
	saved, err := pipelinetest.Job{World: world, Sizes: sizes, Steps: split, Grads: grads, New: factory("saved")}.Run()
	if err != nil {
		t.Fatal(err)
	}
	restore := []pipeline.State{saved[0].State, saved[1].State}
	if _, err := (pipelinetest.Job{World: world, Sizes: sizes, Steps: 0, Grads: grads, New: factory("restored"), Restore: restore}).Run(); err != nil {
		t.Fatal(err)
	}
	for r := range world {
		was, is := stages["saved"][r].timer, stages["restored"][r].timer
		if is.warmed != split || is.timed != split-1 || !slices.Equal(is.backward, was.backward) || !slices.Equal(is.process, was.process) {
			t.Errorf("rank %d: restored %d steps warmed, %d timed, backward %v, selection %v; saved %d, %d, %v, %v",
				r, is.warmed, is.timed, is.backward, is.process, was.warmed, was.timed, was.backward, was.process)
		}
		if stages["restored"][r].merges != nil {
			t.Errorf("rank %d: a merge plan %v during the warm-up", r, stages["restored"][r].merges)
		}
	}
	if _, err := (pipelinetest.Job{World: world, Sizes: sizes, Steps: warmup - split, Grads: grads, New: factory("resumed"), Restore: restore}).Run(); err != nil {
		t.Fatal(err)
	}
	for r, s := range stages["resumed"] {
		if s.timer.warmed != warmup || s.timer.timed != warmup-1 || !slices.Equal(s.merges, []int{len(sizes)}) {
			t.Errorf("rank %d: after the resumed warm-up, %d steps warmed, %d timed, merge plan %v; want %d, %d, [%d]",
				r, s.timer.warmed, s.timer.timed, s.merges, warmup, warmup-1, len(sizes))
		}
	}
}
