package kernels

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestShiftedPlanesAreColumnRows checks that the windows of shiftedPlanes are, bit for bit, the
// rows of im2col's column matrix.
func TestShiftedPlanesAreColumnRows(t *testing.T) {
	for _, c := range []struct{ cin, h, w, k int }{{2, 5, 7, 3}, {3, 16, 16, 3}, {1, 6, 4, 5}, {2, 9, 11, 5}, {1, 1, 1, 3}, {2, 3, 2, 7}} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			g, err := newConvGeom(c.cin, c.h, c.w, 4, c.k, 1, (c.k-1)/2)
			if err != nil {
				t.Fatal(err)
			}
			if g.rows == nil {
				t.Fatal("no rows for a stride-1 convolution with same padding")
			}
			r := rand.New(rand.NewPCG(3, uint64(c.h)))
			x := randSlice(r, c.cin*c.h*c.w)
			col := make([]float32, g.kdim*g.outPlane)
			g.im2col(col, g.outPlane, x)
			e := randSlice(r, c.cin*c.k*g.extent) // stale contents must not show through
			g.shiftedPlanes(e, x)
			for row, off := range g.rows {
				if got, want := e[off:off+g.outPlane], col[row*g.outPlane:(row+1)*g.outPlane]; !slices.Equal(got, want) {
					t.Fatalf("row %d: %v, want %v", row, got, want)
				}
			}
		})
	}
}

// TestGemmRowsMatchesGemm compares gemmRows, on rows that overlap and come in any order, with
// Sgemm on the same rows copied into a matrix.
func TestGemmRowsMatchesGemm(t *testing.T) {
	if fastKernel == nil {
		t.Skip("no assembly kernel on this CPU")
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct{ m, n, k int }{{16, 1024, 144}, {5, 37, 9}, {33, 256, 300}, {8, 32, 1}} {
		b := randSlice(r, c.n*3+c.k*7)
		rows := make([]int, c.k)
		dense := make([]float32, c.k*c.n)
		for l := range rows {
			rows[l] = r.IntN(len(b) - c.n + 1)
			copy(dense[l*c.n:], b[rows[l]:rows[l]+c.n])
		}
		a := randSlice(r, c.m*c.k)
		want, got := randSlice(r, c.m*c.n), make([]float32, c.m*c.n)
		copy(got, want)
		Sgemm(false, false, c.m, c.n, c.k, 1.5, a, c.k, dense, c.n, 0.5, want, c.n, false)
		if !gemmRows(c.m, c.n, c.k, 1.5, a, c.k, b, rows, 0.5, got, c.n) {
			t.Fatalf("%+v: gemmRows declined", c)
		}
		assertClose(t, fmt.Sprint(c), got, want)
		rows[0] = len(b) - c.n + 1
		if gemmRows(c.m, c.n, c.k, 1, a, c.k, b, rows, 0, got, c.n) {
			t.Errorf("%+v: a row past the end of b was accepted", c)
		}
	}
}
