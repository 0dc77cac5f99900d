package nets

import (
	"fmt"

	"github.com/chewxy/hm"
	"github.com/ssfusion/ssfusion/kernels"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// linearOp is y = x·Wᵀ + b with x (R, in), W (out, in) as PyTorch stores it, b (out). It calls
// Gorgonia's BLAS directly so that the weight is never transposed in memory (Gorgonia's Mul
// would need a Transpose node, which copies it every step).
type linearOp struct {
	opBase
	in, out int
	needDX  bool // false when x is data: its gradient is not computed
	y       buffer
}

// linear applies a linearOp; b may be nil.
func linear(x, w, b *G.Node, needDX bool) (*G.Node, error) {
	ws := w.Shape()
	if x.Dims() != 2 || ws.Dims() != 2 || x.Shape()[1] != ws[1] {
		return nil, fmt.Errorf("linear: x %v and weight %v do not match", x.Shape(), ws)
	}
	arity := 2
	ch := G.Nodes{x, w}
	if b != nil {
		if b.Dims() != 1 || b.Shape()[0] != ws[0] {
			return nil, fmt.Errorf("linear: bias %v does not match weight %v", b.Shape(), ws)
		}
		arity, ch = 3, append(ch, b)
	}
	op := &linearOp{opBase: opBase{name: "linear", arity: arity}, in: ws[1], out: ws[0], needDX: needDX}
	return G.ApplyOp(op, ch...)
}

func (o *linearOp) Type() hm.Type {
	if o.arity == 3 {
		return fnType(2, 2, 2, 1)
	}
	return fnType(2, 2, 2)
}

func (o *linearOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf(ds, 0)
	if err != nil {
		return nil, err
	}
	return tensor.Shape{s[0], o.out}, nil
}

func (o *linearOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	x, w := in[0], in[1]
	r := len(x) / o.in
	t, y := o.y.get(tensor.Shape{r, o.out}, false)
	if o.arity == 3 {
		b := in[2]
		for i := 0; i < r; i++ {
			copy(y[i*o.out:(i+1)*o.out], b)
		}
	}
	beta := float32(0)
	if o.arity == 3 {
		beta = 1
	}
	kernels.Sgemm(false, true, r, o.out, o.in, 1, x, o.in, w, o.in, beta, y, o.out, true)
	return t, nil
}

func (o *linearOp) DiffWRT(n int) []bool {
	d := []bool{o.needDX, true, true}
	return d[:n]
}

func (o *linearOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	var dx G.Op
	if o.needDX {
		dx = &linearDXOp{opBase: opBase{name: "linear.dx", arity: 2}, fwd: o}
	}
	return weightedGrads(in, grad, dx, &linearDWOp{opBase: opBase{name: "linear.dw", arity: 2}, fwd: o})
}

// linearDXOp computes dx = dy·W.
type linearDXOp struct {
	opBase
	fwd *linearOp
	dx  buffer
}

func (o *linearDXOp) Type() hm.Type { return fnType(2, 2, 2) }

func (o *linearDXOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf(ds, 1)
	if err != nil {
		return nil, err
	}
	return tensor.Shape{s[0], o.fwd.in}, nil
}

func (o *linearDXOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	w, dy := in[0], in[1]
	r := len(dy) / o.fwd.out
	t, dx := o.dx.get(tensor.Shape{r, o.fwd.in}, false)
	kernels.Sgemm(false, false, r, o.fwd.in, o.fwd.out, 1, dy, o.fwd.out, w, o.fwd.in, 0, dx, o.fwd.in, true)
	return t, nil
}

func (o *linearDXOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *linearDXOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}

// linearDWOp computes dW = dyᵀ·x.
type linearDWOp struct {
	opBase
	fwd *linearOp
	dw  buffer
}

func (o *linearDWOp) Type() hm.Type { return fnType(2, 2, 2) }

func (o *linearDWOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{o.fwd.out, o.fwd.in}, nil
}

func (o *linearDWOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	x, dy := in[0], in[1]
	r := len(x) / o.fwd.in
	t, dw := o.dw.get(tensor.Shape{o.fwd.out, o.fwd.in}, false)
	kernels.Sgemm(true, false, o.fwd.out, o.fwd.in, r, 1, dy, o.fwd.out, x, o.fwd.in, 0, dw, o.fwd.in, true)
	return t, nil
}

func (o *linearDWOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *linearDWOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}

// channelSumOp sums a (B, C, ...) tensor over every axis but the channel axis 1: the gradient of a
// per-channel bias (and of BatchNorm's beta).
type channelSumOp struct {
	opBase
	dims, c int
	out     buffer
	acc     []float64
}

func channelSum(x *G.Node) (*G.Node, error) {
	if x.Dims() < 2 {
		return nil, fmt.Errorf("channelSum: want at least 2 dims, got %v", x.Shape())
	}
	op := &channelSumOp{opBase: opBase{name: "channelsum", arity: 1}, dims: x.Dims(), c: x.Shape()[1]}
	return G.ApplyOp(op, x)
}

func (o *channelSumOp) Type() hm.Type { return fnType(1, o.dims) }

func (o *channelSumOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{o.c}, nil
}

func (o *channelSumOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	x := in[0]
	b := vs[0].Shape()[0]
	s := len(x) / (b * o.c)
	t, out := o.out.get(tensor.Shape{o.c}, false)
	if len(o.acc) != o.c {
		o.acc = make([]float64, o.c)
	}
	acc := o.acc
	clear(acc)
	for n := 0; n < b; n++ {
		row := x[n*o.c*s : (n+1)*o.c*s]
		if s == 1 {
			for c, e := range row {
				acc[c] += float64(e)
			}
			continue
		}
		for c := range acc {
			acc[c] += float64(sumF32(row[c*s : (c+1)*s]))
		}
	}
	for c, a := range acc {
		out[c] = float32(a)
	}
	return t, nil
}

func (o *channelSumOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *channelSumOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}
