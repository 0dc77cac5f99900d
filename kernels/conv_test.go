package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// convCase is a convolution's geometry and batch (three images when batch is 0).
type convCase struct{ cin, h, w, cout, k, stride, pad, batch int }

func (c convCase) shape() ConvShape {
	return ConvShape{In: c.cin, Height: c.h, Width: c.w, Out: c.cout, Kernel: c.k, Stride: c.stride, Pad: c.pad}
}

// TestConvMatchesReference compares Forward, BackwardData and BackwardFilter with direct loops in
// float64, for feature maps small enough to be grouped several images per GEMM and large enough
// not to be, and input gradients through col2im and through the flipped filters.
func TestConvMatchesReference(t *testing.T) {
	for _, c := range []convCase{
		{3, 7, 6, 4, 3, 1, 1, 0},
		{3, 7, 7, 5, 3, 2, 1, 0},
		{2, 8, 8, 3, 3, 2, 1, 0},
		{4, 7, 7, 3, 1, 2, 0, 0},
		{4, 5, 5, 3, 1, 1, 0, 0}, // direct: no column matrix
		{2, 6, 5, 3, 3, 1, 0, 0},
		{2, 16, 17, 3, 3, 1, 1, 0}, // one image per GEMM
		{3, 16, 16, 2, 1, 1, 0, 0}, // one image per GEMM, direct
		{2, 8, 16, 3, 3, 1, 1, 0},  // groups of two: the last one is a single image
		{4, 8, 16, 3, 1, 1, 0, 0},  // the same, direct
		{16, 2, 2, 12, 3, 1, 1, 0}, // few positions per filter: col2im rather than flipped filters
		{2, 16, 16, 3, 5, 1, 2, 0}, // one image per GEMM, planes shifted by up to two
		{3, 20, 13, 4, 3, 1, 1, 0}, // one image per GEMM, odd row length
		{2, 6, 6, 3, 3, 1, 1, 12},  // groups of images one per core, the last slot short
	} {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) { checkConv(t, c, ConvIm2col) })
	}
}

// checkConv compares the passes of a Conv made with alg, on a batch of random images, with
// direct loops: the output with a bias, the input gradient and the filter gradient. Garbage (NaN)
// left in the destinations must not show through.
func checkConv(t *testing.T, c convCase, alg ConvAlgorithm) {
	t.Helper()
	conv, err := NewConv(c.shape(), alg)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, uint64(c.h*c.k+c.stride)))
	nb := c.batch
	if nb == 0 {
		nb = 3
	}
	oh, ow := conv.OutputSize()
	x := randSlice(r, nb*c.cin*c.h*c.w)
	w := randSlice(r, c.cout*c.cin*c.k*c.k)
	bias := randSlice(r, c.cout)
	dy := randSlice(r, nb*c.cout*oh*ow)
	want, wantDX, wantDW := referenceConv(c, oh, ow, nb, x, w, bias, dy)
	garbage := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.NaN())
		}
		return v
	}
	y, dx, dw := garbage(len(want)), garbage(len(wantDX)), garbage(len(wantDW))
	for pass := range 2 { // the second pass runs on the working memory the first one left
		conv.Forward(y, x, w, bias, nb)
		conv.BackwardData(dx, dy, w, nb)
		conv.BackwardFilter(dw, x, dy, nb)
		assertClose(t, fmt.Sprint("output, pass ", pass), y, want)
		assertClose(t, fmt.Sprint("dx, pass ", pass), dx, wantDX)
		assertClose(t, fmt.Sprint("dw, pass ", pass), dw, wantDW)
	}
}

// referenceConv computes the output (with bias), input gradient and filter gradient of the
// convolution c with direct loops in float64.
func referenceConv(c convCase, oh, ow, nb int, x, w, bias, dy []float32) (y, dx, dw []float32) {
	y = make([]float32, nb*c.cout*oh*ow)
	dx64 := make([]float64, nb*c.cin*c.h*c.w)
	dw64 := make([]float64, c.cout*c.cin*c.k*c.k)
	for n := 0; n < nb; n++ {
		for o := 0; o < c.cout; o++ {
			for oy := 0; oy < oh; oy++ {
				for ox := 0; ox < ow; ox++ {
					out := (n*c.cout+o)*oh*ow + oy*ow + ox
					sum := float64(bias[o])
					g := float64(dy[out])
					for ci := 0; ci < c.cin; ci++ {
						for i := 0; i < c.k; i++ {
							for j := 0; j < c.k; j++ {
								yy, xx := oy*c.stride-c.pad+i, ox*c.stride-c.pad+j
								if yy < 0 || yy >= c.h || xx < 0 || xx >= c.w {
									continue
								}
								in := (n*c.cin+ci)*c.h*c.w + yy*c.w + xx
								f := ((o*c.cin+ci)*c.k+i)*c.k + j
								sum += float64(w[f]) * float64(x[in])
								dx64[in] += g * float64(w[f])
								dw64[f] += g * float64(x[in])
							}
						}
					}
					y[out] = float32(sum)
				}
			}
		}
	}
	dx, dw = make([]float32, len(dx64)), make([]float32, len(dw64))
	for i, v := range dx64 {
		dx[i] = float32(v)
	}
	for i, v := range dw64 {
		dw[i] = float32(v)
	}
	return y, dx, dw
}

// TestConvRejectsBadShapes checks NewConv's errors.
func TestConvRejectsBadShapes(t *testing.T) {
	for _, s := range []ConvShape{
		{In: 1, Height: 4, Width: 4, Out: 1, Kernel: 0, Stride: 1},
		{In: 1, Height: 4, Width: 4, Out: 1, Kernel: 3, Stride: 0},
		{In: 1, Height: 4, Width: 4, Out: 1, Kernel: 3, Stride: 1, Pad: -1},
		{In: 1, Height: 2, Width: 4, Out: 1, Kernel: 3, Stride: 1},
	} {
		if _, err := NewConv(s, ConvAuto); err == nil {
			t.Errorf("%+v: no error", s)
		}
	}
}

// TestIm2colCol2imMatchReference checks the column matrix and its adjoint against direct loops,
// for the shifted geometries (stride 1, "same" padding: one copy or add per column row) and the
// others, including images smaller than the kernel where whole taps see only padding. Garbage
// (NaN) in the destinations must be overwritten.
func TestIm2colCol2imMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	nan := float32(math.NaN())
	for _, c := range []struct{ cin, h, w, k, stride, pad int }{
		{3, 8, 8, 3, 1, 1}, {2, 7, 5, 3, 1, 1}, {2, 6, 6, 5, 1, 2}, {1, 1, 1, 3, 1, 1},
		{2, 2, 2, 5, 1, 2}, {1, 1, 3, 5, 1, 2}, {2, 7, 7, 3, 2, 1}, {2, 6, 5, 3, 1, 0},
		{3, 5, 5, 1, 1, 0}, {2, 6, 6, 1, 2, 0}, {1, 4, 4, 3, 1, 2},
	} {
		name := fmt.Sprintf("%+v", c)
		g, err := newConvGeom(c.cin, c.h, c.w, 1, c.k, c.stride, c.pad)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ld := g.outPlane + 3 // rows ld apart, as when images sit side by side
		x := randSlice(r, c.cin*c.h*c.w)
		col := make([]float32, g.kdim*ld)
		for i := range col {
			col[i] = nan
		}
		g.im2col(col, ld, x)
		want := make([]float32, c.cin*c.h*c.w)
		src := randSlice(r, len(col))
		for row := 0; row < g.kdim; row++ {
			ch, i, j := row/(c.k*c.k), row/c.k%c.k, row%c.k
			for oy := 0; oy < g.oh; oy++ {
				for ox := 0; ox < g.ow; ox++ {
					y, xx := oy*c.stride-c.pad+i, ox*c.stride-c.pad+j
					var v float32
					inside := y >= 0 && y < c.h && xx >= 0 && xx < c.w
					if inside {
						v = x[(ch*c.h+y)*c.w+xx]
						want[(ch*c.h+y)*c.w+xx] += src[row*ld+oy*g.ow+ox]
					}
					if got := col[row*ld+oy*g.ow+ox]; got != v {
						t.Fatalf("%s: col[%d][%d,%d] = %g, want %g", name, row, oy, ox, got, v)
					}
				}
			}
			for q := g.outPlane; q < ld; q++ {
				if !math.IsNaN(float64(col[row*ld+q])) {
					t.Fatalf("%s: im2col wrote past its row, col[%d][%d]", name, row, q)
				}
			}
		}
		dx := make([]float32, len(x))
		for i := range dx {
			dx[i] = nan
		}
		g.col2im(dx, src, ld)
		assertClose(t, name+" col2im", dx, want)
	}
}
