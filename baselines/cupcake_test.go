package baselines

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/pipeline"
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
	if _, err := NewCupcake(dist.NewInProc(1)[0], tensors, compress.Config{Density: 0.1, Selector: "topk"}, -1); err == nil || !strings.Contains(err.Error(), "trial steps") {
		t.Errorf("negative trial steps: %v", err)
	}
	if _, err := NewCupcake(dist.NewInProc(1)[0], tensors, compress.Config{Density: 0, Selector: "topk"}, 0); err == nil || !strings.Contains(err.Error(), "density") {
		t.Errorf("zero density: %v", err)
	}
}
