package nets

import (
	"fmt"

	"github.com/chewxy/hm"
	"github.com/ssfusion/ssfusion/internal/parallel"
	"github.com/ssfusion/ssfusion/kernels"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// decoderOp is the language model's output layer y = x·Wᵀ + b, x (R, H), W (V, H), b (V): a
// linear layer whose every pass is split across cores, including the bias, which a (700, 10000)
// output makes too large to broadcast or sum on one core.
type decoderOp struct {
	opBase
	in, out int
	y       buffer
}

func decoderLayer(x, w, b *G.Node) (*G.Node, error) {
	ws := w.Shape()
	if x.Dims() != 2 || ws.Dims() != 2 || x.Shape()[1] != ws[1] || b.Shape().TotalSize() != ws[0] {
		return nil, fmt.Errorf("decoder: x %v, weight %v and bias %v do not match", x.Shape(), ws, b.Shape())
	}
	return G.ApplyOp(&decoderOp{opBase: opBase{name: "decoder", arity: 3}, in: ws[1], out: ws[0]}, x, w, b)
}

// decoderBlock is the number of vocabulary columns the forward computes at a time: a (700, 512)
// block of the output fits in L2.
const decoderBlock = 512

func (o *decoderOp) Type() hm.Type { return fnType(2, 2, 2, 1) }

func (o *decoderOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf(ds, 0)
	if err != nil {
		return nil, err
	}
	return tensor.Shape{s[0], o.out}, nil
}

// Do splits the output by columns (vocabulary entries), so that each core packs only its part of
// W, the large operand, and writes its part of every row. The bias is added to each block of
// columns right after its product, while the block is still in cache (broadcasting it into the
// output first, for a product that adds to it, was about 20% slower).
func (o *decoderOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	x, w, b := in[0], in[1], in[2]
	r := len(x) / o.in
	if len(x) != r*o.in || len(w) != o.out*o.in || len(b) != o.out {
		return nil, fmt.Errorf("%s: inputs of %d, %d and %d values", o.name, len(x), len(w), len(b))
	}
	t, y := o.y.get(tensor.Shape{r, o.out}, false)
	parallel.For(o.out, decoderBlock, func(_, lo, hi int) {
		for j0 := lo; j0 < hi; j0 += decoderBlock {
			j1 := min(j0+decoderBlock, hi)
			kernels.Sgemm(false, true, r, j1-j0, o.in, 1, x, o.in, w[j0*o.in:], o.in, 0, y[j0:], o.out, false)
			for i := 0; i < r; i++ {
				addF32(y[i*o.out+j0:i*o.out+j1], b[j0:j1])
			}
		}
	})
	return t, nil
}

func (o *decoderOp) DiffWRT(n int) []bool { return []bool{true, true, true}[:n] }

func (o *decoderOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	dx, err := G.ApplyOp(&decoderDXOp{opBase: opBase{name: "decoder.dx", arity: 2}, fwd: o}, in[1], grad)
	if err != nil {
		return nil, err
	}
	dw, err := G.ApplyOp(&decoderDWOp{opBase: opBase{name: "decoder.dw", arity: 2}, fwd: o}, in[0], grad)
	if err != nil {
		return nil, err
	}
	db, err := columnSum(grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx, dw, db}, nil
}

// decoderDXOp computes dx = dy·W.
type decoderDXOp struct {
	opBase
	fwd *decoderOp
	dx  buffer
}

func (o *decoderDXOp) Type() hm.Type { return fnType(2, 2, 2) }

func (o *decoderDXOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf(ds, 1)
	if err != nil {
		return nil, err
	}
	return tensor.Shape{s[0], o.fwd.in}, nil
}

func (o *decoderDXOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	w, dy := in[0], in[1]
	f := o.fwd
	r := len(dy) / f.out
	t, dx := o.dx.get(tensor.Shape{r, f.in}, false)
	kernels.Sgemm(false, false, r, f.in, f.out, 1, dy, f.out, w, f.in, 0, dx, f.in, true)
	return t, nil
}

func (o *decoderDXOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *decoderDXOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}

// decoderDWOp computes dW = dyᵀ·x.
type decoderDWOp struct {
	opBase
	fwd *decoderOp
	dw  buffer
}

func (o *decoderDWOp) Type() hm.Type { return fnType(2, 2, 2) }

func (o *decoderDWOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{o.fwd.out, o.fwd.in}, nil
}

func (o *decoderDWOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	x, dy := in[0], in[1]
	f := o.fwd
	r := len(x) / f.in
	t, dw := o.dw.get(tensor.Shape{f.out, f.in}, false)
	kernels.Sgemm(true, false, f.out, f.in, r, 1, dy, f.out, x, f.in, 0, dw, f.in, true)
	return t, nil
}

func (o *decoderDWOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *decoderDWOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}

// columnSumOp sums a (R, C) matrix over its rows: the gradient of a bias. Columns are split
// across cores and each column is summed row by row, in float32, so that the result does not
// depend on the split.
type columnSumOp struct {
	opBase
	c   int
	out buffer
}

func columnSum(x *G.Node) (*G.Node, error) {
	if x.Dims() != 2 {
		return nil, fmt.Errorf("columnSum: want a matrix, got %v", x.Shape())
	}
	return G.ApplyOp(&columnSumOp{opBase: opBase{name: "columnsum", arity: 1}, c: x.Shape()[1]}, x)
}

func (o *columnSumOp) Type() hm.Type { return fnType(1, 2) }

func (o *columnSumOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return tensor.Shape{o.c}, nil }

func (o *columnSumOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	x, c := in[0], o.c
	rows := len(x) / c
	t, out := o.out.get(tensor.Shape{c}, false)
	// Chunks of whole 16-float vectors, at least 256 columns each.
	parallel.For((c+15)/16, 16, func(_, lo, hi int) {
		lo, hi = lo*16, min(hi*16, c)
		acc := out[lo:hi]
		clear(acc)
		for r := 0; r < rows; r++ {
			addF32(acc, x[r*c+lo:r*c+hi])
		}
	})
	return t, nil
}

func (o *columnSumOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *columnSumOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}
