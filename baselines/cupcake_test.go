package baselines

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipeline/pipelinetest"
)

func TestBalancedGroups(t *testing.T) {
	for _, tc := range []struct {
		sizes  []int
		groups int
		want   []int
	}{
		{[]int{10, 10, 10, 10}, 2, []int{2, 2}},
		{[]int{10, 10, 10, 10}, 4, []int{1, 1, 1, 1}},
		{[]int{10, 10, 10, 10}, 9, []int{1, 1, 1, 1}}, // no more groups than tensors
		{[]int{10, 10, 10, 10}, 1, []int{4}},
		{[]int{100, 1, 1, 1}, 2, []int{1, 3}},    // the big one fills a share alone
		{[]int{1, 1, 1, 100}, 2, []int{3, 1}},    // ...wherever it is
		{[]int{1, 1, 1, 100}, 3, []int{2, 1, 1}}, // every group keeps a tensor
		{[]int{5, 5, 5, 5, 5, 5}, 3, []int{2, 2, 2}},
		{[]int{7}, 3, []int{1}},
	} {
		if got := balancedGroups(tc.sizes, tc.groups); !slices.Equal(got, tc.want) {
			t.Errorf("balancedGroups(%v, %d) = %v, want %v", tc.sizes, tc.groups, got, tc.want)
		}
	}
}

// The search tries 1, 2, 3, ... groups and stops at the first that is slower than the one
// before, keeping the fastest tried, on every rank alike; later steps use it.
func TestCupcakeSearchesTheNumberOfGroups(t *testing.T) {
	shapes := [][]int{{40, 30}, {8, 3, 3, 3}, {40}, {4, 4}, {300}, {20}}
	times := map[int]float64{1: 10, 2: 8, 3: 7, 4: 7.5, 5: 1} // 5 is never tried
	const world, trial = 2, 2
	var mu sync.Mutex
	var stages []*cupcake
	newPipe := func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		f, s, err := newCupcake(comm, tensors, compress.Config{Density: 0.1, Selector: "topk"}, trial)
		if err != nil {
			return nil, err
		}
		// Only rank 0's times count: the other rank's disagree, and must not matter.
		s.stepTime = func(groups int) float64 { return times[groups] * float64(1+comm.Rank()) }
		if comm.Rank() == 1 {
			s.stepTime = func(groups int) float64 { return 100 - times[groups] }
		}
		mu.Lock()
		stages = append(stages, s)
		mu.Unlock()
		return f, nil
	}
	// One replayed step, four trials of two steps, then two steps with the choice.
	runs := runPipelines(t, world, 1+4*trial+2, shapes, normalGrads(shapes), newPipe, nil)
	for _, s := range stages {
		tried := slices.Sorted(func(yield func(int) bool) {
			for g := range s.times {
				if !yield(g) {
					return
				}
			}
		})
		if !s.done || s.groups != 3 || !slices.Equal(tried, []int{1, 2, 3, 4}) || len(s.buckets) != 3 {
			t.Errorf("rank %d: settled %v on %d groups (%d buffers), tried %v; want 3 after trying 1 to 4",
				s.comm.Rank(), s.done, s.groups, len(s.buckets), tried)
		}
	}
	for j, v := range runs[0].Grads[len(runs[0].Grads)-1][0] {
		if v != runs[1].Grads[len(runs[1].Grads)-1][0][j] {
			t.Fatal("the ranks' gradients differ")
		}
	}
}

func TestNewCupcakeRefusesBadSettings(t *testing.T) {
	tensors := psgdTensors(psgdShapes)
	if _, err := NewCupcake(inproc.New(1)[0], tensors, compress.Config{Density: 0.1, Selector: "topk"}, -1); err == nil || !strings.Contains(err.Error(), "trial steps") {
		t.Errorf("negative trial steps: %v", err)
	}
	if _, err := NewCupcake(inproc.New(1)[0], tensors, compress.Config{Density: 0, Selector: "topk"}, 0); err == nil || !strings.Contains(err.Error(), "density") {
		t.Errorf("zero density: %v", err)
	}
}

// cupcakeFactory builds Cupcake pipelines that try each partition for trial steps; times,
// when set, replaces the measured step time of a partition of y groups by times[y].
func cupcakeFactory(cfg compress.Config, trial int, times map[int]float64) pipelinetest.Factory {
	return func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		f, s, err := newCupcake(comm, tensors, cfg, trial)
		if err != nil {
			return nil, err
		}
		if times != nil {
			s.stepTime = func(groups int) float64 { return times[groups] }
		}
		return f, nil
	}
}

// TestCupcakeResume: restored from a checkpoint, Cupcake continues bit for bit wherever
// the search stood: in its first trial, between trials, in the middle of one, or settled;
// which needs the partition in use, the times tried, the current trial's sum and whether
// the search is over as well as the memory. The step times make the search try 1 to 4
// groups, two steps each after the replayed first step, and settle on 3 at the end of
// step 8.
func TestCupcakeResume(t *testing.T) {
	sizes := []int{1200, 216, 40, 16, 300, 20}
	grads := pipelinetest.Normal(sizes, []float32{1, 4, 0.5, 8, 2, 3})
	times := map[int]float64{1: 10, 2: 8, 3: 7, 4: 7.5, 5: 1}
	const trial, settled, steps = 2, 1 + 4*2, 12
	for _, tc := range []struct {
		name string
		cfg  compress.Config
	}{
		{"top-k", compress.Config{Density: 0.05, Selector: "topk"}},
		{"top-k, momentum and density warm-up", compress.Config{Density: 0.05, Selector: "topk", Momentum: 0.9, WarmupSteps: 4}},
		{"DGC's sampled threshold", compress.Config{Density: 0.05, Selector: "dgc"}},
	} {
		for _, world := range []int{2, 4} {
			for _, split := range []int{1, 2, 4, settled, settled + 2} {
				job := pipelinetest.Job{World: world, Sizes: sizes, Steps: steps, Grads: grads, New: cupcakeFactory(tc.cfg, trial, times)}
				if err := job.CheckResume(split); err != nil {
					t.Errorf("%s, %d ranks, resumed at step %d: %v", tc.name, world, split, err)
				}
			}
		}
	}
}

// TestCupcakeRestoreRefusesOtherSettings: as TestOMGSRestoreRefusesOtherSettings, for a
// state saved in the middle of Cupcake's search.
func TestCupcakeRestoreRefusesOtherSettings(t *testing.T) {
	sizes := []int{1200, 216, 40, 16, 300, 20}
	grads := pipelinetest.Normal(sizes, nil)
	cfg := compress.Config{Density: 0.05, Selector: "topk"}
	newPipe := cupcakeFactory(cfg, 2, map[int]float64{1: 10, 2: 8, 3: 7, 4: 7.5})
	saved, err := pipelinetest.Job{World: 2, Sizes: sizes, Steps: 4, Grads: grads, New: newPipe}.Run()
	if err != nil {
		t.Fatal(err)
	}
	omgs, err := pipelinetest.Job{World: 2, Sizes: sizes, Steps: 2, Grads: grads, New: omgsFactory(4*800, cfg, slowLink, 2, nil)}.Run()
	if err != nil {
		t.Fatal(err)
	}
	checkRestoreRefusals(t, saved[0].State, sizes, newPipe, []restoreCase{
		{"other world size", 4, sizes, nil, "2 ranks"},
		{"more tensors", 2, append(slices.Clone(sizes), 7), nil, "6 tensors"},
		{"other tensor size", 2, []int{1200, 216, 40, 16, 300, 21}, nil, "tensor 5"},
		{"OMGS-SGD's state", 2, sizes, func(st *pipeline.State) { st.Extra = omgs[0].State.Extra }, "Cupcake"},
		{"no state of its own", 2, sizes, func(st *pipeline.State) { st.Extra = nil }, "search"},
	})
}
