package nets

import (
	"testing"

	"github.com/ssfusion/ssfusion/internal/parallel"
)

func BenchmarkAccumulate(b *testing.B) {
	acc := make([]float32, 2_000_000)
	g := make([]float32, len(acc))
	for i := range g {
		g[i] = float32(i)
	}
	b.SetBytes(int64(len(g) * 4))
	for i := 0; i < b.N; i++ {
		parallel.For(len(g), hookChunk, func(_, lo, hi int) { accumulate(acc[lo:hi], g[lo:hi]) })
	}
}

func BenchmarkExpShiftSum(b *testing.B) {
	src := make([]float32, 10000)
	for i := range src {
		src[i] = float32(i%997)/100 - 5
	}
	dst := make([]float32, len(src))
	b.SetBytes(int64(len(src) * 4))
	for i := 0; i < b.N; i++ {
		expShiftSum(dst, src, 5)
	}
}
