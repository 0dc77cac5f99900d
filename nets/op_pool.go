package nets

import (
	"fmt"

	"github.com/chewxy/hm"
	"github.com/ssfusion/ssfusion/internal/parallel"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// maxPoolOp is a 2×2, stride-2 max pool over the planes of a (B, C, H, W) input, floor mode (an
// odd last row or column is left out), as PyTorch's MaxPool2d(2). Gorgonia's MaxPool2D allocates
// its output, its argmax mask and its input gradient on every step. The forward keeps, op-private,
// which of the four inputs of each window won, for the backward of the same step.
type maxPoolOp struct {
	opBase
	in  tensor.Shape
	y   buffer
	arg []uint8 // per output: 0..3, the winner's place in its window (row-major)
}

func maxPool2x2(x *G.Node) (*G.Node, error) {
	s := x.Shape()
	if s.Dims() != 4 || s[2] < 2 || s[3] < 2 {
		return nil, fmt.Errorf("maxpool: want a (B, C, H, W) input of at least 2x2, got %v", s)
	}
	return G.ApplyOp(&maxPoolOp{opBase: opBase{name: "maxpool2x2", arity: 1}, in: s.Clone()}, x)
}

func (o *maxPoolOp) outShape() tensor.Shape {
	return tensor.Shape{o.in[0], o.in[1], o.in[2] / 2, o.in[3] / 2}
}

func (o *maxPoolOp) Type() hm.Type { return fnType(4, 4) }

func (o *maxPoolOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return o.outShape(), nil }

func (o *maxPoolOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	t, y := o.y.get(o.outShape(), false)
	if len(o.arg) != len(y) {
		o.arg = make([]uint8, len(y))
	}
	x := in[0]
	h, w := o.in[2], o.in[3]
	oh, ow := h/2, w/2
	planes := o.in[0] * o.in[1]
	parallel.For(planes, 8, func(_, lo, hi int) {
		for p := lo; p < hi; p++ {
			xp := x[p*h*w : (p+1)*h*w]
			for oy := 0; oy < oh; oy++ {
				r0, r1 := xp[2*oy*w:][:w], xp[(2*oy+1)*w:][:w]
				yr, ar := y[(p*oh+oy)*ow:][:ow], o.arg[(p*oh+oy)*ow:][:ow]
				if poolVector {
					for ox := 0; ox < ow; ox += 16 {
						maxPoolRow16(&yr[ox], &ar[ox], &r0[2*ox], &r1[2*ox], min(16, ow-ox))
					}
					continue
				}
				for ox := range yr {
					m, a := r0[2*ox], uint8(0)
					if v := r0[2*ox+1]; v > m {
						m, a = v, 1
					}
					if v := r1[2*ox]; v > m {
						m, a = v, 2
					}
					if v := r1[2*ox+1]; v > m {
						m, a = v, 3
					}
					yr[ox], ar[ox] = m, a
				}
			}
		}
	})
	return t, nil
}

func (o *maxPoolOp) DiffWRT(n int) []bool { return []bool{true}[:n] }

func (o *maxPoolOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	d, err := G.ApplyOp(&maxPoolGradOp{opBase: opBase{name: o.name + ".dx", arity: 1}, fwd: o}, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{d}, nil
}

// maxPoolGradOp routes each output gradient to the input that won its window; the other inputs
// get 0.
type maxPoolGradOp struct {
	opBase
	fwd *maxPoolOp
	dx  buffer
}

func (o *maxPoolGradOp) Type() hm.Type { return fnType(4, 4) }

func (o *maxPoolGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return o.fwd.in.Clone(), nil
}

func (o *maxPoolGradOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	f := o.fwd
	h, w := f.in[2], f.in[3]
	oh, ow := h/2, w/2
	odd := h%2 != 0 || w%2 != 0
	t, dx := o.dx.get(f.in, odd) // windows cover everything but an odd last row or column
	dy := in[0]
	if len(f.arg) != len(dy) {
		return nil, fmt.Errorf("%s: no forward pass to go back through", o.name)
	}
	planes := f.in[0] * f.in[1]
	parallel.For(planes, 8, func(_, lo, hi int) {
		for p := lo; p < hi; p++ {
			dp := dx[p*h*w : (p+1)*h*w]
			for oy := 0; oy < oh; oy++ {
				r0, r1 := dp[2*oy*w:][:w], dp[(2*oy+1)*w:][:w]
				gr, ar := dy[(p*oh+oy)*ow:][:ow], f.arg[(p*oh+oy)*ow:][:ow]
				if poolVector {
					for ox := 0; ox < ow; ox += 16 {
						maxPoolGradRow16(&r0[2*ox], &r1[2*ox], &gr[ox], &ar[ox], min(16, ow-ox))
					}
					continue
				}
				for ox, g := range gr {
					var q [4]float32
					q[ar[ox]&3] = g
					r0[2*ox], r0[2*ox+1], r1[2*ox], r1[2*ox+1] = q[0], q[1], q[2], q[3]
				}
			}
		}
	})
	return t, nil
}

func (o *maxPoolGradOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *maxPoolGradOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}
