package ssfusion

import "github.com/ssfusion/ssfusion/compress"

// CostModel is the alpha-beta model of PAPERS.md ("Cost model"): a collective costs a
// start-up time per message (Alpha, seconds) plus a time per byte (Beta, seconds/byte), and
// selection costs SelectPerElement seconds per element. A zero Beta means no cost model.
type CostModel struct {
	Alpha, Beta      float64
	SelectPerElement float64
}

// allReduce is the time of a ring allreduce of bytes on p ranks.
func (m CostModel) allReduce(bytes float64, p int) float64 {
	return 2*float64(p-1)*m.Alpha + 2*float64(p-1)/float64(p)*bytes*m.Beta
}

// allGather is the time of a ring allgather of bytes per rank on p ranks.
func (m CostModel) allGather(bytes float64, p int) float64 {
	return float64(p-1)*m.Alpha + float64(p-1)*bytes*m.Beta
}

// Choose decides which tensors of one fusion buffer are sparsified (the rest stay dense).
// sizes are the tensors' element counts.
//
// The rule (ours; PAPERS.md, SSFusion 1): a tensor is a candidate when it has at least
// threshold elements; without a cost model every candidate is sparsified. With one, a
// candidate stays only if selecting and allgathering its k pairs costs less than its share
// of the dense allreduce; then, if the buffer's split into a dense allreduce and a sparse
// allgather costs no less than allreducing the whole buffer (the extra message's start-up
// cost outweighs the bytes saved), nothing in the buffer is sparsified.
func Choose(sizes []int, threshold int, density float64, model CostModel, world int) []bool {
	sparse := make([]bool, len(sizes))
	for i, n := range sizes {
		sparse[i] = n >= threshold && n > 0
	}
	if model.Beta <= 0 || world < 2 {
		return sparse
	}
	var total, dense, pairs, selectTime float64
	any := false
	for i, n := range sizes {
		bytes := 4 * float64(n)
		total += bytes
		if sparse[i] {
			k := float64(compress.KFor(n, density))
			own := model.SelectPerElement*float64(n) + model.allGather(8*k, world) - model.allGather(0, world)
			if own >= model.allReduce(bytes, world)-model.allReduce(0, world) {
				sparse[i] = false
			}
		}
		if sparse[i] {
			any = true
			pairs += 8 * float64(compress.KFor(n, density))
			selectTime += model.SelectPerElement * float64(n)
		} else {
			dense += bytes
		}
	}
	if !any {
		return sparse
	}
	split := selectTime + model.allGather(pairs, world)
	if dense > 0 {
		split += model.allReduce(dense, world)
	}
	if split >= model.allReduce(total, world) {
		clear(sparse)
	}
	return sparse
}
