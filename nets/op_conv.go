package nets

import (
	"fmt"

	"github.com/chewxy/hm"
	"github.com/ssfusion/ssfusion/kernels"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// convAlgorithm is how new convolution ops compute; tests set it to kernels.ConvWinograd to
// reach Winograd with models too small for it to pay.
var convAlgorithm = kernels.ConvAuto

// convOp is a 2-D convolution (NCHW, filters (out, in, k, k), optional per-channel bias) on
// kernels.Conv: GEMMs over column matrices, or Winograd for stride-1 3×3 convolutions with
// enough channels, the work split across cores. It replaces Gorgonia's Conv2d, whose im2col,
// col2im and output transposes are single-threaded and take most of a step. The backward ops
// recompute the column matrices instead of keeping them alive between forward and backward, and
// share the forward op's kernels.Conv, whose working memory and Winograd-transformed filters
// they reuse.
type convOp struct {
	opBase
	s      kernels.ConvShape
	oh, ow int
	needDX bool
	conv   *kernels.Conv
	y      buffer
}

// conv2d applies a convOp; b may be nil.
func conv2d(x, w, b *G.Node, stride, pad int, needDX bool) (*G.Node, error) {
	xs, ws := x.Shape(), w.Shape()
	if xs.Dims() != 4 || ws.Dims() != 4 || ws[2] != ws[3] || xs[1] != ws[1] {
		return nil, fmt.Errorf("conv: input %v and filter %v do not match", xs, ws)
	}
	s := kernels.ConvShape{In: xs[1], Height: xs[2], Width: xs[3], Out: ws[0], Kernel: ws[2], Stride: stride, Pad: pad}
	conv, err := kernels.NewConv(s, convAlgorithm)
	if err != nil {
		return nil, err
	}
	arity := 2
	ch := G.Nodes{x, w}
	if b != nil {
		if b.Dims() != 1 || b.Shape()[0] != ws[0] {
			return nil, fmt.Errorf("conv: bias %v does not match filter %v", b.Shape(), ws)
		}
		arity, ch = 3, append(ch, b)
	}
	op := &convOp{opBase: opBase{name: fmt.Sprintf("conv%dx%d/%d", s.Kernel, s.Kernel, stride), arity: arity}, s: s, needDX: needDX, conv: conv}
	op.oh, op.ow = conv.OutputSize()
	return G.ApplyOp(op, ch...)
}

func (o *convOp) Type() hm.Type {
	if o.arity == 3 {
		return fnType(4, 4, 4, 1)
	}
	return fnType(4, 4, 4)
}

func (o *convOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf(ds, 0)
	if err != nil {
		return nil, err
	}
	return tensor.Shape{s[0], o.s.Out, o.oh, o.ow}, nil
}

// batch is the number of images of x, a batch of input images.
func (o *convOp) batch(x []float32) int { return len(x) / (o.s.In * o.s.Height * o.s.Width) }

func (o *convOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	x, w := in[0], in[1]
	nb := o.batch(x)
	t, y := o.y.get(tensor.Shape{nb, o.s.Out, o.oh, o.ow}, false)
	var bias []float32
	if o.arity == 3 {
		bias = in[2]
	}
	o.conv.Forward(y, x, w, bias, nb)
	return t, nil
}

func (o *convOp) DiffWRT(n int) []bool {
	d := []bool{o.needDX, true, true}
	return d[:n]
}

func (o *convOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	var dx G.Op
	if o.needDX {
		dx = &convDXOp{opBase: opBase{name: o.name + ".dx", arity: 2}, fwd: o}
	}
	return weightedGrads(in, grad, dx, &convDWOp{opBase: opBase{name: o.name + ".dw", arity: 2}, fwd: o})
}

// convDXOp computes the input gradient (kernels.Conv.BackwardData).
type convDXOp struct {
	opBase
	fwd *convOp
	dx  buffer
}

func (o *convDXOp) Type() hm.Type { return fnType(4, 4, 4) }

func (o *convDXOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf(ds, 1)
	if err != nil {
		return nil, err
	}
	f := o.fwd.s
	return tensor.Shape{s[0], f.In, f.Height, f.Width}, nil
}

func (o *convDXOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	f := o.fwd
	w, dy := in[0], in[1]
	nb := len(dy) / (f.s.Out * f.oh * f.ow)
	t, dx := o.dx.get(tensor.Shape{nb, f.s.In, f.s.Height, f.s.Width}, false)
	f.conv.BackwardData(dx, dy, w, nb)
	return t, nil
}

func (o *convDXOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *convDXOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}

// convDWOp computes the filter gradient (kernels.Conv.BackwardFilter).
type convDWOp struct {
	opBase
	fwd *convOp
	dw  buffer
}

func (o *convDWOp) Type() hm.Type { return fnType(4, 4, 4) }

func (o *convDWOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	f := o.fwd.s
	return tensor.Shape{f.Out, f.In, f.Kernel, f.Kernel}, nil
}

func (o *convDWOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	f := o.fwd
	x, dy := in[0], in[1]
	t, dw := o.dw.get(tensor.Shape{f.s.Out, f.s.In, f.s.Kernel, f.s.Kernel}, false)
	f.conv.BackwardFilter(dw, x, dy, f.batch(x))
	return t, nil
}

func (o *convDWOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *convDWOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}
