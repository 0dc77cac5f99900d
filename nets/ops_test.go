package nets

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ssfusion/ssfusion/kernels"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// runGraph builds y = build(inputs) in a fresh graph, runs loss = Σ y·r and returns y and the
// gradient of the loss with respect to every input.
func runGraph(t *testing.T, in []*tensor.Dense, r []float32, build func([]*G.Node) (*G.Node, error)) ([]float32, [][]float32) {
	t.Helper()
	g := G.NewGraph()
	var nodes []*G.Node
	for i, v := range in {
		v = v.Clone().(*tensor.Dense)
		nodes = append(nodes, G.NewTensor(g, G.Float32, v.Dims(), G.WithShape(v.Shape()...), G.WithName(fmt.Sprint("in", i)), G.WithValue(v)))
	}
	y, err := build(nodes)
	if err != nil {
		t.Fatal(err)
	}
	rt := tensor.New(tensor.WithBacking(append([]float32(nil), r...)), tensor.WithShape(y.Shape()...))
	rn := G.NewTensor(g, G.Float32, y.Dims(), G.WithShape(y.Shape()...), G.WithName("r"), G.WithValue(rt))
	var yv G.Value
	G.Read(y, &yv)
	prod, err := G.HadamardProd(y, rn)
	if err != nil {
		t.Fatal(err)
	}
	loss, err := G.Sum(prod)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := G.Grad(loss, nodes...); err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(nodes...))
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	out, err := floats(yv)
	if err != nil {
		t.Fatal(err)
	}
	var grads [][]float32
	for _, n := range nodes {
		gv, err := n.Grad()
		if err != nil {
			t.Fatal(err)
		}
		f, err := floats(gv)
		if err != nil {
			t.Fatal(err)
		}
		grads = append(grads, append([]float32(nil), f...))
	}
	return append([]float32(nil), out...), grads
}

func randTensor(r *rand.Rand, shape ...int) *tensor.Dense {
	v := make([]float32, tensor.Shape(shape).TotalSize())
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return tensor.New(tensor.WithBacking(v), tensor.WithShape(shape...))
}

func randSlice(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// assertClose fails unless a and b agree to float32 accumulation accuracy.
func assertClose(t *testing.T, what string, a, b []float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d values, want %d", what, len(a), len(b))
	}
	var scale float64
	for _, v := range b {
		scale = math.Max(scale, math.Abs(float64(v)))
	}
	for i := range a {
		if d := math.Abs(float64(a[i] - b[i])); d > 1e-4*(1+scale) {
			t.Fatalf("%s[%d] = %g, want %g (of %d values)", what, i, a[i], b[i], len(a))
		}
	}
}

// TestConvMatchesGorgonia compares the conv op's output and gradients with Gorgonia's Conv2d, for
// feature maps small enough to be grouped several images per GEMM and large enough not to be,
// and input gradients through col2im and through the flipped filters.
func TestConvMatchesGorgonia(t *testing.T) {
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
	} {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) { checkConv(t, c) })
	}
}

// TestWinogradMatchesGorgonia compares the conv op, with Winograd forced on for few channels,
// with Gorgonia's Conv2d: odd feature maps (tiles cut at the edges), padding 2, one tile per
// image, and batches that run as one group across cores, as groups one per core and one image
// per group. Package kernels checks the Winograd passes themselves more widely.
func TestWinogradMatchesGorgonia(t *testing.T) {
	defer func(a kernels.ConvAlgorithm) { convAlgorithm = a }(convAlgorithm)
	convAlgorithm = kernels.ConvWinograd
	for _, c := range []convCase{
		{3, 8, 8, 4, 3, 1, 1, 3},
		{2, 5, 9, 3, 3, 1, 1, 2},    // odd both ways
		{2, 7, 7, 5, 3, 1, 2, 2},    // padding 2: output larger than input
		{5, 2, 2, 6, 3, 1, 1, 4},    // one tile per image
		{3, 12, 12, 4, 3, 1, 1, 17}, // groups of four on the cores, the last a single image
		{2, 15, 33, 3, 3, 1, 1, 2},  // one image per group, odd
	} {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) { checkConv(t, c) })
	}
}

// convCase is a convolution's geometry.
type convCase struct{ cin, h, w, cout, k, stride, pad, batch int }

// checkConv compares the conv op's output and gradients (input, filters, bias) on a batch of
// random images (three unless c says otherwise) with Gorgonia's Conv2d.
func checkConv(t *testing.T, c convCase) {
	r := rand.New(rand.NewPCG(1, uint64(c.h*c.k+c.stride)))
	nb := c.batch
	if nb == 0 {
		nb = 3
	}
	x := randTensor(r, nb, c.cin, c.h, c.w)
	w := randTensor(r, c.cout, c.cin, c.k, c.k)
	bias := randTensor(r, c.cout)
	oh, ow := (c.h+2*c.pad-c.k)/c.stride+1, (c.w+2*c.pad-c.k)/c.stride+1
	rr := randSlice(r, nb*c.cout*oh*ow)
	want, wantG := runGraph(t, []*tensor.Dense{x, w}, rr, func(n []*G.Node) (*G.Node, error) {
		return G.Conv2d(n[0], n[1], tensor.Shape{c.k, c.k}, []int{c.pad, c.pad}, []int{c.stride, c.stride}, []int{1, 1})
	})
	got, gotG := runGraph(t, []*tensor.Dense{x, w, bias}, rr, func(n []*G.Node) (*G.Node, error) {
		return conv2d(n[0], n[1], n[2], c.stride, c.pad, true)
	})
	plane := oh * ow
	for i := range want {
		want[i] += bias.Float32s()[(i/plane)%c.cout]
	}
	assertClose(t, "output", got, want)
	assertClose(t, "dx", gotG[0], wantG[0])
	assertClose(t, "dw", gotG[1], wantG[1])
	db := make([]float32, c.cout)
	for i, v := range rr {
		db[(i/plane)%c.cout] += v
	}
	assertClose(t, "db", gotG[2], db)
}

// TestLinearMatchesGorgonia compares the linear op with x·Wᵀ + b built from Gorgonia ops.
func TestLinearMatchesGorgonia(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 3))
	x, w, b := randTensor(r, 5, 7), randTensor(r, 4, 7), randTensor(r, 1, 4)
	rr := randSlice(r, 5*4)
	want, wantG := runGraph(t, []*tensor.Dense{x, w, b}, rr, func(n []*G.Node) (*G.Node, error) {
		wt, err := G.Transpose(n[1])
		if err != nil {
			return nil, err
		}
		xw, err := G.Mul(n[0], wt)
		if err != nil {
			return nil, err
		}
		return G.BroadcastAdd(xw, n[2], nil, []byte{0})
	})
	b1 := b.Clone().(*tensor.Dense)
	if err := b1.Reshape(4); err != nil {
		t.Fatal(err)
	}
	got, gotG := runGraph(t, []*tensor.Dense{x, w, b1}, rr, func(n []*G.Node) (*G.Node, error) {
		return linear(n[0], n[1], n[2], true)
	})
	assertClose(t, "output", got, want)
	for i, name := range []string{"dx", "dw", "db"} {
		assertClose(t, name, gotG[i], wantG[i])
	}
}

// TestReLUMatchesGorgonia compares the ReLU op with Gorgonia's Rectify.
func TestReLUMatchesGorgonia(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	x := randTensor(r, 3, 4, 5)
	rr := randSlice(r, 60)
	want, wantG := runGraph(t, []*tensor.Dense{x}, rr, func(n []*G.Node) (*G.Node, error) { return G.Rectify(n[0]) })
	got, gotG := runGraph(t, []*tensor.Dense{x}, rr, func(n []*G.Node) (*G.Node, error) { return relu(n[0]) })
	assertClose(t, "output", got, want)
	assertClose(t, "dx", gotG[0], wantG[0])
}

// TestAddReLUMatchesGorgonia compares the fused residual addition and ReLU with Gorgonia's Add
// and Rectify.
func TestAddReLUMatchesGorgonia(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 6))
	x, y := randTensor(r, 3, 4, 5), randTensor(r, 3, 4, 5)
	rr := randSlice(r, 60)
	want, wantG := runGraph(t, []*tensor.Dense{x, y}, rr, func(n []*G.Node) (*G.Node, error) {
		s, err := G.Add(n[0], n[1])
		if err != nil {
			return nil, err
		}
		return G.Rectify(s)
	})
	got, gotG := runGraph(t, []*tensor.Dense{x, y}, rr, func(n []*G.Node) (*G.Node, error) { return addReLU(n[0], n[1]) })
	assertClose(t, "output", got, want)
	assertClose(t, "dx", gotG[0], wantG[0])
	assertClose(t, "dy", gotG[1], wantG[1])
}

// TestMaxPoolMatchesGorgonia compares the 2×2 max pool with Gorgonia's MaxPool2D, on even and odd
// feature maps, and rows of one to several vectors of windows, with the scalar and vector loops.
func TestMaxPoolMatchesGorgonia(t *testing.T) {
	defer func(v bool) { poolVector = v }(poolVector)
	have := poolVector
	for _, shape := range [][]int{{2, 3, 4, 6}, {3, 2, 5, 7}, {2, 2, 4, 34}, {1, 2, 2, 66}, {1, 1, 3, 2}} {
		for _, vector := range []bool{false, true} {
			if vector && !have {
				continue
			}
			poolVector = vector
			t.Run(fmt.Sprint(shape, "/vector=", vector), func(t *testing.T) { checkMaxPool(t, shape) })
		}
	}
}

// TestMaxPoolVectorMatchesScalar compares the vector rows of the max pool with the scalar loop
// bitwise, winners included, where ties, NaNs, infinities and signed zeros decide.
func TestMaxPoolVectorMatchesScalar(t *testing.T) {
	if !poolVector {
		t.Skip("no vector rows on this CPU")
	}
	defer func(v bool) { poolVector = v }(poolVector)
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	vals := []float32{1, 1, -1, 0, float32(math.Copysign(0, -1)), inf, -inf, nan, 2, -2}
	r := rand.New(rand.NewPCG(31, 32))
	const b, c, h, w = 2, 3, 6, 40
	x := make([]float32, b*c*h*w)
	for i := range x {
		x[i] = vals[r.IntN(len(vals))]
	}
	dy := randSlice(r, b*c*(h/2)*(w/2))
	run := func(vector bool) (y, dx []float32, arg []uint8) {
		poolVector = vector
		op := &maxPoolOp{opBase: opBase{name: "pool", arity: 1}, in: tensor.Shape{b, c, h, w}}
		yt, err := op.Do(tensor.New(tensor.WithBacking(append([]float32(nil), x...)), tensor.WithShape(b, c, h, w)))
		if err != nil {
			t.Fatal(err)
		}
		g := &maxPoolGradOp{opBase: opBase{name: "pool.dx", arity: 1}, fwd: op}
		dxt, err := g.Do(tensor.New(tensor.WithBacking(append([]float32(nil), dy...)), tensor.WithShape(b, c, h/2, w/2)))
		if err != nil {
			t.Fatal(err)
		}
		yf, _ := floats(yt)
		df, _ := floats(dxt)
		return append([]float32(nil), yf...), append([]float32(nil), df...), append([]uint8(nil), op.arg...)
	}
	y0, dx0, a0 := run(false)
	y1, dx1, a1 := run(true)
	for i := range y0 {
		if math.Float32bits(y0[i]) != math.Float32bits(y1[i]) || a0[i] != a1[i] {
			t.Fatalf("window %d: vector max %g (place %d), scalar %g (place %d)", i, y1[i], a1[i], y0[i], a0[i])
		}
	}
	for i := range dx0 {
		if math.Float32bits(dx0[i]) != math.Float32bits(dx1[i]) {
			t.Fatalf("dx[%d]: vector %g, scalar %g", i, dx1[i], dx0[i])
		}
	}
}

// checkMaxPool compares the max pool with Gorgonia's on a random input of the given shape.
func checkMaxPool(t *testing.T, shape []int) {
	r := rand.New(rand.NewPCG(8, uint64(shape[2])))
	x := randTensor(r, shape...)
	rr := randSlice(r, shape[0]*shape[1]*(shape[2]/2)*(shape[3]/2))
	want, wantG := runGraph(t, []*tensor.Dense{x}, rr, func(n []*G.Node) (*G.Node, error) {
		return G.MaxPool2D(n[0], tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2})
	})
	got, gotG := runGraph(t, []*tensor.Dense{x}, rr, func(n []*G.Node) (*G.Node, error) { return maxPool2x2(n[0]) })
	assertClose(t, "output", got, want)
	assertClose(t, "dx", gotG[0], wantG[0])
}

// TestBatchNormMatchesGorgonia compares training-mode BatchNorm (output, gradients and running
// statistics after one step) with Gorgonia's BatchNorm, whose gradient is known to be right, and
// the fused BatchNorm+ReLU with Gorgonia's BatchNorm followed by Rectify.
func TestBatchNormMatchesGorgonia(t *testing.T) {
	for _, tc := range []struct {
		shape []int
		relu  bool
	}{{[]int{4, 3, 5, 6}, false}, {[]int{6, 2, 1, 1}, false}, {[]int{4, 3, 5, 6}, true}, {[]int{6, 2, 1, 1}, true}} {
		shape := tc.shape
		t.Run(fmt.Sprint(shape, tc.relu), func(t *testing.T) {
			c := shape[1]
			r := rand.New(rand.NewPCG(6, uint64(c)))
			x := randTensor(r, shape...)
			gamma, beta := randTensor(r, 1, c, 1, 1), randTensor(r, 1, c, 1, 1)
			rr := randSlice(r, x.Shape().TotalSize())
			var ref *G.BatchNormOp
			want, wantG := runGraph(t, []*tensor.Dense{x, gamma, beta}, rr, func(n []*G.Node) (*G.Node, error) {
				y, _, _, op, err := G.BatchNorm(n[0], n[1], n[2], bnMomentum, bnEps)
				ref = op
				if err != nil || !tc.relu {
					return y, err
				}
				return G.Rectify(y)
			})
			st := &bnStats{mean: make([]float32, c), vari: []float32{1, 1, 1}[:c]}
			step := &stepState{n: shape[0]}
			g1, b1 := gamma.Clone().(*tensor.Dense), beta.Clone().(*tensor.Dense)
			g1.Reshape(c)
			b1.Reshape(c)
			got, gotG := runGraph(t, []*tensor.Dense{x, g1, b1}, rr, func(n []*G.Node) (*G.Node, error) {
				return batchNorm(n[0], n[1], n[2], st, step, true, tc.relu)
			})
			assertClose(t, "output", got, want)
			for i, name := range []string{"dx", "dgamma", "dbeta"} {
				assertClose(t, name, gotG[i], wantG[i])
			}
			rm, rv := ref.Stats()
			assertClose(t, "running mean", st.mean, rm.Data().([]float32))
			assertClose(t, "running var", st.vari, rv.Data().([]float32))
		})
	}
}
