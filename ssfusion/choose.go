package ssfusion

import (
	"fmt"
	"strings"
	"time"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/netmodel"
)

// Rule is how SSFusion decides which tensors of a fusion buffer may be sparsified.
type Rule int

const (
	// BySize (ours, after the paper's selective sparsification) makes a tensor of at least
	// the threshold's elements a candidate; with a network to plan on, Choose's cost model
	// then prunes the candidates.
	BySize Rule = iota
	// ByRank is the selective compressor of the SSFusion authors' public code: a tensor
	// whose parameter is 2-D (a fully connected weight, an embedding) stays dense and
	// every other one (convolution kernels, biases, norms' scales and shifts) is
	// sparsified, whatever its size and whatever the network. A tensor of unknown
	// dimensions (Dims 0) counts as not 2-D.
	ByRank
	// ByCost makes every non-empty tensor a candidate and leaves the choice to Choose's
	// cost model alone; it needs a network to plan on.
	ByCost
)

var ruleNames = [...]string{BySize: "size", ByRank: "rank", ByCost: "cost"}

// String returns the rule's name, as ParseRule reads it.
func (r Rule) String() string {
	if r < 0 || int(r) >= len(ruleNames) {
		return fmt.Sprintf("Rule(%d)", int(r))
	}
	return ruleNames[r]
}

// RuleNames lists the rules' names, the default first.
func RuleNames() []string { return ruleNames[:] }

// ParseRule returns the rule named s.
func ParseRule(s string) (Rule, error) {
	for r, name := range ruleNames {
		if s == name {
			return Rule(r), nil
		}
	}
	return 0, fmt.Errorf("unknown select rule %q (have %s)", s, strings.Join(RuleNames(), ", "))
}

// Candidates reports which tensors of one fusion buffer rule lets be sparsified. sizes are
// the tensors' element counts, dims their parameters' numbers of dimensions (0, or past
// the end of dims, when unknown); threshold is the size rule's. An empty tensor is never a
// candidate: it has nothing to select.
func Candidates(rule Rule, sizes, dims []int, threshold int) []bool {
	out := make([]bool, len(sizes))
	for i, n := range sizes {
		switch rule {
		case BySize:
			out[i] = n >= threshold
		case ByRank:
			out[i] = i >= len(dims) || dims[i] != 2
		case ByCost:
			out[i] = true
		}
		out[i] = out[i] && n > 0
	}
	return out
}

// Choose decides which candidates (see Candidates) of one fusion buffer are sparsified;
// the rest stay dense. sizes are the tensors' element counts; net is the network the
// world ranks communicate over, and selection costs selectPerElement seconds per element.
//
// Without a network (nil), or with a single rank, every candidate is sparsified. With
// one, a candidate stays only if selecting its elements and allgathering its k pairs
// costs less than its share of the dense allreduce, both counted without the start-ups,
// which the buffer's collectives pay whether or not the tensor is in them (see transfer).
// Then, if the buffer's split into a dense allreduce and a sparse allgather costs no less
// than allreducing the whole buffer (the extra collective's start-ups outweigh the bytes
// saved), nothing in the buffer is sparsified.
func Choose(candidates []bool, sizes []int, density float64, net *netmodel.Network, selectPerElement float64, world int) []bool {
	sparse := make([]bool, len(sizes))
	for i, n := range sizes {
		sparse[i] = i < len(candidates) && candidates[i] && n > 0
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

// SentDensity is the fraction of a model's gradient elements SSFusion sends a step when it
// plans without a network, so that every candidate is sparsified: all the elements of a
// tensor kept dense and k = KFor(n, density) of each sparsified one. sizes and dims are the
// model's tensors as Candidates takes them. It is the density an equal-traffic control
// gives another pipeline: what SSFusion actually sends, not the density it was asked for.
func SentDensity(rule Rule, sizes, dims []int, threshold int, density float64) float64 {
	sparse := Candidates(rule, sizes, dims, threshold)
	sent, total := 0, 0
	for i, n := range sizes {
		total += n
		if sparse[i] {
			sent += compress.KFor(n, density)
		} else {
			sent += n
		}
	}
	if total == 0 {
		return 0
	}
	return float64(sent) / float64(total)
}
