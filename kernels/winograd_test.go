package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestWinogradMatchesReference compares Winograd convolutions, forced on for few channels, with
// direct loops: even and odd feature maps (odd ones have tiles cut at the edges), every padding
// the tiles allow, one tile per image, and batches that run as one group across cores, as groups
// one per core with a short last group, and one image per group; with the vector transforms and
// the scalar ones.
func TestWinogradMatchesReference(t *testing.T) {
	for _, c := range []convCase{
		{3, 8, 8, 4, 3, 1, 1, 3},
		{3, 7, 6, 4, 3, 1, 1, 3},    // odd rows
		{2, 5, 9, 3, 3, 1, 1, 2},    // odd both ways
		{4, 6, 5, 3, 3, 1, 0, 3},    // no padding
		{2, 7, 7, 5, 3, 1, 2, 2},    // padding 2: output larger than input
		{5, 2, 2, 6, 3, 1, 1, 4},    // one tile per image
		{3, 1, 1, 2, 3, 1, 1, 3},    // one output per image
		{3, 12, 12, 4, 3, 1, 1, 17}, // groups of four on the cores, the last a single image
		{2, 16, 32, 3, 3, 1, 1, 3},  // one image per group
		{2, 15, 33, 3, 3, 1, 1, 2},  // the same, odd
	} {
		for _, vector := range []bool{false, true} {
			if vector && !winoVector {
				continue
			}
			t.Run(fmt.Sprintf("%+v/vector=%v", c, vector), func(t *testing.T) {
				defer func(v bool) { winoVector = v }(winoVector)
				winoVector = vector
				conv, err := NewConv(c.shape(), ConvWinograd)
				if err != nil || conv.g.wino == nil {
					t.Fatalf("%+v does not run with Winograd (%v)", c, err)
				}
				checkConv(t, c, ConvWinograd)
			})
		}
	}
}

// TestWinogradVectorTransformsMatchScalar compares the vector plane transforms with the scalar
// ones: bitwise where they make the same operations in the same order, to rounding for the input
// gradient, whose vector form adds the overlapping columns of neighbouring tiles before adding
// them to the plane. On planes from one tile to
// several vectors of tiles per row, with tiles placed at an offset in a wider block as in a group
// of images.
func TestWinogradVectorTransformsMatchScalar(t *testing.T) {
	if !winoVector {
		t.Skip("no vector transforms on this CPU")
	}
	defer func(v bool) { winoVector = v }(winoVector)
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ h, w, pad int }{
		{2, 2, 1}, {4, 4, 1}, {8, 8, 1}, {16, 16, 1}, {32, 32, 1}, {6, 34, 1}, {4, 66, 1},
		{4, 30, 1}, {10, 12, 0}, {7, 9, 1}, {5, 5, 2},
	} {
		g, err := newConvGeom(1, c.h, c.w, 1, 3, 1, c.pad)
		if err != nil || !g.useWinograd(true) {
			t.Fatalf("%+v: no Winograd (%v)", c, err)
		}
		wg := g.wino
		t0 := 3
		ld := wg.tiles + 5
		x := randSlice(r, g.h*g.w)
		dy := randSlice(r, g.outPlane)
		m := randSlice(r, winoChannelStride(ld))
		pad := make([]float32, wg.ph*wg.pw+winoSlack)
		run := func(vector bool) (v, dm, y, dx []float32) {
			winoVector = vector
			v = make([]float32, winoChannelStride(ld))
			dm = make([]float32, winoChannelStride(ld))
			y = make([]float32, g.outPlane)
			dx = make([]float32, g.h*g.w)
			g.winoInput(v, ld, t0, x, pad)
			g.winoOutputGrad(dm, ld, t0, dy)
			g.winoOutput(y, m, ld, t0, 0.5)
			g.winoInputGrad(dx, m, ld, t0, pad)
			return v, dm, y, dx
		}
		v0, dm0, y0, dx0 := run(false)
		v1, dm1, y1, dx1 := run(true)
		assertClose(t, fmt.Sprintf("%+v inputGrad", c), dx1, dx0)
		for _, d := range []struct {
			name      string
			got, want []float32
		}{{"input", v1, v0}, {"outputGrad", dm1, dm0}, {"output", y1, y0}} {
			for i := range d.want {
				if math.Float32bits(d.got[i]) != math.Float32bits(d.want[i]) {
					t.Fatalf("%+v %s[%d] = %g, want %g", c, d.name, i, d.got[i], d.want[i])
				}
			}
		}
	}
}

// TestWinogradOnlyWhereItApplies checks which algorithm NewConv picks: with ConvAuto, Winograd
// stays off for the convolutions it does not compute and for few channels; ConvWinograd turns it
// on for any convolution it computes, and ConvIm2col off for all.
func TestWinogradOnlyWhereItApplies(t *testing.T) {
	for _, c := range []struct {
		convCase
		auto, computes bool
	}{
		{convCase{128, 8, 8, 128, 3, 1, 1, 0}, true, true},
		{convCase{32, 32, 32, 32, 3, 1, 1, 0}, true, true},
		{convCase{16, 32, 32, 16, 3, 1, 1, 0}, false, true}, // the transforms cost what they save
		{convCase{512, 2, 2, 512, 3, 1, 1, 0}, true, true},  // one tile per image
		{convCase{512, 4, 4, 512, 3, 1, 1, 0}, true, true},
		{convCase{3, 32, 32, 64, 3, 1, 1, 0}, false, true}, // few input channels
		{convCase{64, 8, 8, 64, 3, 2, 1, 0}, false, false}, // strided
		{convCase{64, 8, 8, 64, 1, 1, 0, 0}, false, false}, // 1×1
		{convCase{64, 8, 8, 64, 5, 1, 2, 0}, false, false}, // 5×5
		{convCase{64, 8, 8, 64, 3, 1, 3, 0}, false, false}, // padding 3
	} {
		for _, a := range []struct {
			alg  ConvAlgorithm
			want bool
		}{{ConvAuto, c.auto}, {ConvWinograd, c.computes}, {ConvIm2col, false}} {
			conv, err := NewConv(c.shape(), a.alg)
			if err != nil {
				t.Fatal(err)
			}
			if got := conv.g.wino != nil; got != a.want {
				t.Errorf("%+v, algorithm %d: Winograd %v, want %v", c.convCase, a.alg, got, a.want)
			}
		}
	}
}

// BenchmarkConvLayer times the forward pass, input gradient and filter gradient of the 3×3
// convolutions of VGG on CIFAR at batch 32, with Winograd and with im2col.
func BenchmarkConvLayer(b *testing.B) {
	for _, c := range []convCase{
		{64, 32, 32, 64, 3, 1, 1, 32},
		{128, 16, 16, 128, 3, 1, 1, 32},
		{256, 8, 8, 256, 3, 1, 1, 32},
		{512, 4, 4, 512, 3, 1, 1, 32},
		{512, 2, 2, 512, 3, 1, 1, 32},
		{16, 32, 32, 16, 3, 1, 1, 32}, // ResNet-20
		{32, 16, 16, 32, 3, 1, 1, 32},
		{64, 8, 8, 64, 3, 1, 1, 32},
	} {
		for _, wino := range []bool{false, true} {
			b.Run(fmt.Sprintf("%dx%dx%d/wino=%v", c.cin, c.h, c.w, wino), func(b *testing.B) {
				benchConv(b, c, wino)
			})
		}
	}
}

func benchConv(b *testing.B, c convCase, wino bool) {
	alg := ConvIm2col
	if wino {
		alg = ConvWinograd
	}
	conv, err := NewConv(c.shape(), alg)
	if err != nil {
		b.Fatal(err)
	}
	oh, ow := conv.OutputSize()
	r := rand.New(rand.NewPCG(1, 2))
	x := randSlice(r, c.batch*c.cin*c.h*c.w)
	w := randSlice(r, c.cout*c.cin*c.k*c.k)
	dy := randSlice(r, c.batch*c.cout*oh*ow)
	y, dx, dw := make([]float32, len(dy)), make([]float32, len(x)), make([]float32, len(w))
	step := func() {
		conv.Forward(y, x, w, nil, c.batch)
		conv.BackwardData(dx, dy, w, c.batch)
		conv.BackwardFilter(dw, x, dy, c.batch)
	}
	step()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		step()
	}
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// BenchmarkWinoTransforms times the plane transforms on a 32×32 plane, per tile.
func BenchmarkWinoTransforms(b *testing.B) {
	g, _ := newConvGeom(64, 32, 32, 64, 3, 1, 1)
	g.useWinograd(true)
	wg := g.wino
	r := rand.New(rand.NewPCG(1, 2))
	x := randSlice(r, g.h*g.w)
	ld := wg.tiles
	v := make([]float32, winoChannelStride(ld))
	pad := make([]float32, wg.ph*wg.pw+winoSlack)
	for _, c := range []struct {
		name string
		fn   func()
	}{
		{"input", func() { g.winoInput(v, ld, 0, x, pad) }},
		{"output", func() { g.winoOutput(x, v, ld, 0, 1) }},
		{"outputGrad", func() { g.winoOutputGrad(v, ld, 0, x) }},
		{"inputGrad", func() { g.winoInputGrad(x, v, ld, 0, pad) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c.fn()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*wg.tiles), "ns/tile")
		})
	}
}
