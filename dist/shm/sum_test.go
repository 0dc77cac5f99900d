package shm

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ssfusion/ssfusion/dist/internal/wire"
)

// TestSumRanks checks that the fused sums give the bits of wire.SumInto chained in rank order,
// for every operand count and for lengths around the unrolled loops' strides, with
// operands of very different magnitudes, so that the order of the additions shows. NaNs
// must stay NaNs; their payloads are not compared, since the compiler may swap the
// operands of an addition, which decides the payload on amd64.
func TestSumRanks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for P := 1; P <= 11; P++ {
		for _, n := range []int{0, 1, 3, 4, 5, 31, 32, 33, 1000} {
			srcs := make([][]float32, P)
			for p := range srcs {
				srcs[p] = make([]float32, n)
				for i := range srcs[p] {
					srcs[p][i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(16)-8)))
					if rng.IntN(50) == 0 {
						srcs[p][i] = math.Float32frombits(0x7fc00000 | uint32(rng.IntN(1<<22)))
					}
				}
			}
			want := append([]float32(nil), srcs[0]...)
			for _, s := range srcs[1:] {
				wire.SumInto(want, want, s)
			}
			got := make([]float32, n)
			sumRanks(got, srcs)
			for i := range n {
				g, w := got[i], want[i]
				if g != g && w != w {
					continue
				}
				if math.Float32bits(g) != math.Float32bits(w) {
					t.Fatalf("P=%d n=%d: element %d = %#x, want %#x", P, n, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
				}
			}
		}
	}
}
