package nets

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	"github.com/ssfusion/ssfusion/internal/parallel"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// elementPieces is the number of pieces for parallel.Dynamic over n elements of an element-wise
// pass: 32 Ki elements each, enough work to outweigh taking a piece.
func elementPieces(n int) int { return max(1, n>>15) }

// reluOp is max(x, 0). Gorgonia's Rectify builds it from a comparison and a product, two
// allocating nodes forward and three backward.
type reluOp struct {
	opBase
	shape tensor.Shape
	y     buffer
}

func relu(x *G.Node) (*G.Node, error) {
	return G.ApplyOp(&reluOp{opBase: opBase{name: "relu", arity: 1}, shape: x.Shape().Clone()}, x)
}

func (o *reluOp) Type() hm.Type { return fnType(len(o.shape), len(o.shape)) }

func (o *reluOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return o.shape.Clone(), nil }

func (o *reluOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	t, y := o.y.get(o.shape, false)
	x := in[0]
	parallel.Dynamic(len(x), elementPieces(len(x)), func(_, _, lo, hi int) { reluForward(y[lo:hi], x[lo:hi]) })
	return t, nil
}

func (o *reluOp) DiffWRT(n int) []bool { return []bool{true}[:n] }

func (o *reluOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	d, err := reluGrad(o.name, o.shape, out, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{d}, nil
}

// addReLUOp is max(a + b, 0), a residual connection and the ReLU after it in one pass instead of
// Gorgonia's allocating addition and a second pass.
type addReLUOp struct {
	opBase
	shape tensor.Shape
	y     buffer
}

func addReLU(a, b *G.Node) (*G.Node, error) {
	if !a.Shape().Eq(b.Shape()) {
		return nil, fmt.Errorf("add+relu: shapes %v and %v differ", a.Shape(), b.Shape())
	}
	return G.ApplyOp(&addReLUOp{opBase: opBase{name: "add+relu", arity: 2}, shape: a.Shape().Clone()}, a, b)
}

func (o *addReLUOp) Type() hm.Type {
	return fnType(len(o.shape), len(o.shape), len(o.shape))
}

func (o *addReLUOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return o.shape.Clone(), nil }

func (o *addReLUOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	t, y := o.y.get(o.shape, false)
	a, b := in[0], in[1]
	parallel.Dynamic(len(a), elementPieces(len(a)), func(_, _, lo, hi int) { addReLUForward(y[lo:hi], a[lo:hi], b[lo:hi]) })
	return t, nil
}

func (o *addReLUOp) DiffWRT(n int) []bool { return []bool{true, true}[:n] }

// SymDiff hands both inputs the same masked gradient.
func (o *addReLUOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	d, err := reluGrad(o.name, o.shape, out, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{d, d}, nil
}

// reluGradOp is dy where the output was positive, 0 elsewhere.
type reluGradOp struct {
	opBase
	shape tensor.Shape
	dx    buffer
}

func reluGrad(name string, shape tensor.Shape, out, grad *G.Node) (*G.Node, error) {
	return G.ApplyOp(&reluGradOp{opBase: opBase{name: name + ".dx", arity: 2}, shape: shape}, out, grad)
}

func (o *reluGradOp) Type() hm.Type {
	return fnType(len(o.shape), len(o.shape), len(o.shape))
}

func (o *reluGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return o.shape.Clone(), nil }

func (o *reluGradOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	t, dx := o.dx.get(o.shape, false)
	y, dy := in[0], in[1]
	parallel.Dynamic(len(y), elementPieces(len(y)), func(_, _, lo, hi int) { reluBackward(dx[lo:hi], y[lo:hi], dy[lo:hi]) })
	return t, nil
}

func (o *reluGradOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *reluGradOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}

// reluForward sets y = max(x, 0) as Go's max does (NaN stays NaN, -0 becomes +0), on the bits of
// x so that the compiler emits a conditional move: half of the inputs are negative, at random, and
// a branch on the sign mispredicts on every other element.
func reluForward(y, x []float32) {
	y = y[:len(x)]
	if bnVector && len(x) > 0 {
		reluVec(&y[0], &x[0], len(x))
		return
	}
	for i, e := range x {
		u := math.Float32bits(e)
		if u-0x80000000 <= 0x7f800000 { // sign set and not NaN: -0 down to -Inf
			u = 0
		}
		y[i] = math.Float32frombits(u)
	}
}

// addReLUForward sets y = max(a + b, 0) as reluForward does.
func addReLUForward(y, a, b []float32) {
	y, b = y[:len(a)], b[:len(a)]
	if bnVector && len(a) > 0 {
		addReLUVec(&y[0], &a[0], &b[0], len(a))
		return
	}
	for i, e := range a {
		u := math.Float32bits(e + b[i])
		if u-0x80000000 <= 0x7f800000 {
			u = 0
		}
		y[i] = math.Float32frombits(u)
	}
}

// reluBackward sets dx = dy where y > 0 and 0 elsewhere (also where y is NaN), branch-free for
// the same reason as reluForward: y > 0 exactly when its bits lie in [1, +Inf].
func reluBackward(dx, y, dy []float32) {
	dx, dy = dx[:len(y)], dy[:len(y)]
	if bnVector && len(y) > 0 {
		reluGradVec(&dx[0], &y[0], &dy[0], len(y))
		return
	}
	for i, e := range y {
		v := math.Float32bits(dy[i])
		if math.Float32bits(e)-1 >= 0x7f800000 {
			v = 0
		}
		dx[i] = math.Float32frombits(v)
	}
}
