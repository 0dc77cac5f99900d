package pipelinetest

import (
	"fmt"
	"math"
	"slices"
)

// TopKReference computes, independently of the pipelines, what top-k sparsification with
// error feedback must leave on every rank, step by step: each rank adds the step's
// gradient to its residual; within each group of tensors (one tensor for per-tensor
// sparsification, a fusion buffer for multi-tensor) it picks the k largest magnitudes of
// the group's elements, k = max(1, floor(density * group size)), found by a stable sort;
// the picked elements are averaged over the ranks and leave the residual. Without
// feedback the residual is cleared before every step. Elements of tensors in no group
// are sent whole, as a dense tensor. The result is indexed by step, tensor and element.
func TopKReference(world, steps int, sizes []int, grads func(rank, step int) [][]float32, groups [][]int, density float64, feedback bool) [][][]float64 {
	residual := make([][][]float32, world)
	for r := range residual {
		residual[r] = make([][]float32, len(sizes))
		for i, n := range sizes {
			residual[r][i] = make([]float32, n)
		}
	}
	grouped := make([]bool, len(sizes))
	for _, g := range groups {
		for _, id := range g {
			grouped[id] = true
		}
	}
	out := make([][][]float64, steps)
	for s := range steps {
		want := make([][]float64, len(sizes))
		for i, n := range sizes {
			want[i] = make([]float64, n)
		}
		for r := range world {
			g := grads(r, s)
			for i := range sizes {
				acc := residual[r][i]
				if !feedback || !grouped[i] {
					clear(acc)
				}
				for j := range acc {
					acc[j] += g[i][j]
				}
			}
			for _, group := range groups {
				for _, e := range sortedTopK(residual[r], group, density) {
					want[e.tensor][e.index] += float64(residual[r][e.tensor][e.index]) / float64(world)
					residual[r][e.tensor][e.index] = 0
				}
			}
			for i, acc := range residual[r] {
				if !grouped[i] {
					for j, v := range acc {
						want[i][j] += float64(v) / float64(world)
					}
				}
			}
		}
		out[s] = want
	}
	return out
}

// element is one element of a group of tensors.
type element struct{ tensor, index int }

// sortedTopK returns the k largest-magnitude elements of the group's tensors of acc, by a
// stable sort of the group's elements in tensor order.
func sortedTopK(acc [][]float32, group []int, density float64) []element {
	var all []element
	for _, id := range group {
		for j := range acc[id] {
			all = append(all, element{id, j})
		}
	}
	if len(all) == 0 {
		return nil
	}
	k := min(len(all), max(1, int(math.Floor(density*float64(len(all))))))
	slices.SortStableFunc(all, func(a, b element) int {
		x, y := math.Abs(float64(acc[a.tensor][a.index])), math.Abs(float64(acc[b.tensor][b.index]))
		switch {
		case x > y:
			return -1
		case x < y:
			return 1
		}
		return 0
	})
	return all[:k]
}

// CheckReference reports the first gradient of res, on any rank and step, that differs
// from want (TopKReference's result) by more than tol.
func CheckReference(res []Result, want [][][]float64, tol float64) error {
	for r, rank := range res {
		for s, step := range want {
			for i, tensor := range step {
				for j, w := range tensor {
					if got := rank.Grads[s][i][j]; math.Abs(float64(got)-w) > tol {
						return fmt.Errorf("rank %d step %d tensor %d[%d]: %g, want %g", r, s, i, j, got, w)
					}
				}
			}
		}
	}
	return nil
}
