package ssfusion

import (
	"time"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/netmodel"
)

// Choose decides which tensors of one fusion buffer are sparsified (the rest stay dense).
// sizes are the tensors' element counts; net is the network the world ranks communicate
// over, and selection costs selectPerElement seconds per element.
//
// The rule (ours, after SSFusion's selective sparsification): a tensor is a candidate when
// it has at least threshold elements; without a network (nil) every candidate is
// sparsified. With one, a candidate stays only if selecting its elements and allgathering
// its k pairs costs less than its share of the dense allreduce, both counted without the
// start-ups, which the buffer's collectives pay whether or not the tensor is in them (see
// transfer). Then, if the buffer's split into a dense allreduce and a sparse allgather
// costs no less than allreducing the whole buffer (the extra collective's start-ups
// outweigh the bytes saved), nothing in the buffer is sparsified.
func Choose(sizes []int, threshold int, density float64, net *netmodel.Network, selectPerElement float64, world int) []bool {
	sparse := make([]bool, len(sizes))
	for i, n := range sizes {
		sparse[i] = n >= threshold && n > 0
	}
	if net == nil || world < 2 {
		return sparse
	}
	allReduce := func(bytes int) time.Duration { return net.AllReduce(world, bytes) }
	allGather := func(bytes int) time.Duration { return net.AllGather(world, bytes) }
	var total, dense, pairs int
	var selectTime float64
	any := false
	for i, n := range sizes {
		bytes := 4 * n
		total += bytes
		if sparse[i] {
			k := compress.KFor(n, density)
			own := selectPerElement*float64(n) + transfer(allGather, 8*k).Seconds()
			if own >= transfer(allReduce, bytes).Seconds() {
				sparse[i] = false
			}
		}
		if sparse[i] {
			any = true
			pairs += 8 * compress.KFor(n, density)
			selectTime += selectPerElement * float64(n)
		} else {
			dense += bytes
		}
	}
	if !any {
		return sparse
	}
	split := selectTime + allGather(pairs).Seconds()
	if dense > 0 {
		split += allReduce(dense).Seconds()
	}
	if split >= allReduce(total).Seconds() {
		clear(sparse)
	}
	return sparse
}

// transfer is what m bytes add to a collective beyond its start-ups: the growth of its
// cost from m to 2m bytes. For an algorithm whose cost is start-ups plus a time per byte,
// as the alpha-beta model gives every algorithm of a flat network, that is exactly the
// time it spends on m bytes: (P-1)*m*beta for a ring allgather, 2(P-1)/P*m*beta for a
// ring allreduce. Where a network switches algorithms between m and 2m (Ours, Auto) it
// also counts the difference in their start-ups, never below zero.
func transfer(cost func(bytes int) time.Duration, m int) time.Duration {
	return max(0, cost(2*m)-cost(m))
}
