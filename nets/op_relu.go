package nets

import (
	"fmt"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

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
	parallel(len(x), 1<<15, func(_, lo, hi int) {
		for i, e := range x[lo:hi] {
			y[lo+i] = max(e, 0)
		}
	})
	return t, nil
}

func (o *reluOp) DiffWRT(n int) []bool { return []bool{true}[:n] }

func (o *reluOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	d, err := G.ApplyOp(&reluGradOp{opBase: opBase{name: "relu.dx", arity: 2}, fwd: o}, out, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{d}, nil
}

// reluGradOp is dy where the output was positive, 0 elsewhere.
type reluGradOp struct {
	opBase
	fwd *reluOp
	dx  buffer
}

func (o *reluGradOp) Type() hm.Type {
	return fnType(len(o.fwd.shape), len(o.fwd.shape), len(o.fwd.shape))
}

func (o *reluGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return o.fwd.shape.Clone(), nil }

func (o *reluGradOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	t, dx := o.dx.get(o.fwd.shape, false)
	y, dy := in[0], in[1]
	parallel(len(y), 1<<15, func(_, lo, hi int) {
		for i, e := range y[lo:hi] {
			if e > 0 {
				dx[lo+i] = dy[lo+i]
			} else {
				dx[lo+i] = 0
			}
		}
	})
	return t, nil
}

func (o *reluGradOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *reluGradOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}
