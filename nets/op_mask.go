package nets

import (
	"fmt"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// maskOp multiplies its input by a mask the model refills before each run: inverted dropout with
// the model's own seeded generator (Gorgonia's Dropout scales its gradient wrongly and draws from
// a clock-seeded source).
type maskOp struct {
	opBase
	shape tensor.Shape
	mask  []float32
	y     buffer
}

func applyMask(x *G.Node) (*G.Node, *maskOp, error) {
	op := &maskOp{opBase: opBase{name: "dropout", arity: 1}, shape: x.Shape().Clone(), mask: make([]float32, x.Shape().TotalSize())}
	n, err := G.ApplyOp(op, x)
	return n, op, err
}

func (o *maskOp) Type() hm.Type { return fnType(len(o.shape), len(o.shape)) }

func (o *maskOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return o.shape.Clone(), nil }

func (o *maskOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	t, y := o.y.get(o.shape, false)
	for i, x := range in[0] {
		y[i] = x * o.mask[i]
	}
	return t, nil
}

func (o *maskOp) DiffWRT(n int) []bool { return []bool{true}[:n] }

func (o *maskOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	d, err := G.ApplyOp(&maskGradOp{opBase: opBase{name: "dropout.dx", arity: 1}, fwd: o}, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{d}, nil
}

type maskGradOp struct {
	opBase
	fwd *maskOp
	dx  buffer
}

func (o *maskGradOp) Type() hm.Type { return fnType(len(o.fwd.shape), len(o.fwd.shape)) }

func (o *maskGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return o.fwd.shape.Clone(), nil }

func (o *maskGradOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	t, dx := o.dx.get(o.fwd.shape, false)
	for i, g := range in[0] {
		dx[i] = g * o.fwd.mask[i]
	}
	return t, nil
}

func (o *maskGradOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *maskGradOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}
