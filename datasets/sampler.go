package datasets

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
)

// EpochOrder returns a permutation of 0..n-1 that depends only on (seed, epoch), so every rank
// computes the same one without communicating.
//
// The shuffle is written out here, over PCG, rather than taken from math/rand/v2's Perm, whose
// algorithm is not promised to stay the same across Go releases: a run resumed by a newer
// binary must still see the order the interrupted one saw.
func EpochOrder(n int, seed int64, epoch int) []int {
	if n <= 0 {
		return []int{}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	r := rand.NewPCG(uint64(seed), mix64(uint64(epoch)^0x5eed0fe90c4))
	for i := n - 1; i > 0; i-- {
		j := boundedUint64(r, uint64(i)+1)
		order[i], order[j] = order[j], order[i]
	}
	return order
}

// Shard returns rank's share of order: order[rank], order[rank+world], ..., len(order)/world
// elements, like PyTorch's DistributedSampler but dropping the remainder instead of padding,
// so that shards are disjoint and every rank runs the same number of steps.
// It panics if world < 1 or rank is not in [0, world).
func Shard(order []int, rank, world int) []int {
	checkRank("Shard", rank, world)
	per := len(order) / world
	out := make([]int, per)
	for i := range out {
		out[i] = order[rank+i*world]
	}
	return out
}

func checkRank(fn string, rank, world int) {
	if world < 1 || rank < 0 || rank >= world {
		panic(fmt.Sprintf("datasets: %s: rank %d out of range for world size %d", fn, rank, world))
	}
}

// boundedUint64 returns a uniform value in [0, n) from r (Lemire's multiply-and-reject).
func boundedUint64(r *rand.PCG, n uint64) uint64 {
	hi, lo := bits.Mul64(r.Uint64(), n)
	if lo < n {
		threshold := -n % n
		for lo < threshold {
			hi, lo = bits.Mul64(r.Uint64(), n)
		}
	}
	return hi
}

// mix64 is SplitMix64's finaliser: it spreads small, correlated inputs (epochs, ranks, sample
// positions) over all 64 bits so that they can seed independent random streams.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// hash combines values into one well-mixed 64-bit key.
func hash(vals ...uint64) uint64 {
	h := uint64(0x243f6a8885a308d3)
	for _, v := range vals {
		h = mix64(h ^ v)
	}
	return h
}
