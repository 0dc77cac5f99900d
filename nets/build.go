package nets

import (
	"fmt"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// builder adds layers to one graph. A model is built twice from the same code: the training graph
// creates and initialises the parameters (in call order, which is therefore Params order) and
// wraps each in a hookOp; the evaluation graph binds new nodes to the same tensors, in the same
// order, without hooks or gradients. The first error sticks: later calls return nil and the
// architecture code checks b.err once at the end.
type builder struct {
	n     *net
	g     *G.ExprGraph
	train bool
	err   error

	wrt []*G.Node // training graph: parameter nodes, for Grad
	pi  int       // evaluation graph: next parameter to reuse
	si  int       // evaluation graph: next BatchNorm statistics to reuse
}

// count adds a layer's forward floating-point operations to the training graph's total.
func (b *builder) count(flops float64) {
	if b.train {
		b.n.forwardFLOPs += flops
	}
}

func (b *builder) fail(err error) {
	if b.err == nil && err != nil {
		b.err = err
	}
}

// check records err, wrapped with the layer name, and reports whether building may go on.
func (b *builder) check(name string, err error) bool {
	if err != nil {
		b.fail(fmt.Errorf("%s: %w", name, err))
	}
	return b.err == nil
}

// param returns the node through which the layers use a parameter.
func (b *builder) param(name string, shape []int, init initFn) *G.Node {
	if b.err != nil {
		return nil
	}
	n := b.n
	if !b.train {
		if b.pi >= len(n.params) || n.params[b.pi].Name != name || !slices.Equal(n.params[b.pi].Shape, shape) {
			b.fail(fmt.Errorf("evaluation graph asks for parameter %s%v out of training order", name, shape))
			return nil
		}
		t := n.values[b.pi]
		b.pi++
		return G.NewTensor(b.g, G.Float32, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(t))
	}
	size := 1
	for _, d := range shape {
		size *= d
	}
	v := make([]float32, size)
	init(n.initRNG, v, shape)
	t := tensor.New(tensor.WithBacking(v), tensor.WithShape(shape...))
	id := len(n.params)
	p := Param{Name: name, Shape: slices.Clone(shape), Value: v, Grad: make([]float32, size)}
	n.params = append(n.params, p)
	n.values = append(n.values, t)
	node := G.NewTensor(b.g, G.Float32, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(t))
	b.wrt = append(b.wrt, node)
	h, err := G.ApplyOp(newHookOp(id, name, tensor.Shape(shape).Clone(), p.Grad, &n.st), node)
	if !b.check(name, err) {
		return nil
	}
	return h
}

// isData reports whether x is a graph input (no gradient needed), not a computed value.
func isData(x *G.Node) bool { return x.Op() == nil }

// conv is a k×k convolution with out channels, optionally with bias.
func (b *builder) conv(x *G.Node, name string, out, k, stride, pad int, bias bool) *G.Node {
	if b.err != nil {
		return nil
	}
	cin := x.Shape()[1]
	w := b.param(name+".weight", []int{out, cin, k, k}, kaimingFanOut)
	var bn *G.Node
	if bias {
		bn = b.param(name+".bias", []int{out}, fanInUniform(cin*k*k))
	}
	if b.err != nil {
		return nil
	}
	y, err := conv2d(x, w, bn, stride, pad, !isData(x))
	if !b.check(name, err) {
		return nil
	}
	ys := y.Shape() // N, out, oh, ow
	b.count(2 * float64(ys.TotalSize()) * float64(cin*k*k))
	return y
}

// batchNorm adds BatchNorm over the channel axis, with PyTorch's names and initial values.
func (b *builder) batchNorm(x *G.Node, name string) *G.Node { return b.norm(x, name, false) }

// batchNormReLU is batchNorm followed by a ReLU, fused into one op.
func (b *builder) batchNormReLU(x *G.Node, name string) *G.Node { return b.norm(x, name, true) }

func (b *builder) norm(x *G.Node, name string, relu bool) *G.Node {
	if b.err != nil {
		return nil
	}
	c := x.Shape()[1]
	gamma := b.param(name+".weight", []int{c}, constant(1))
	beta := b.param(name+".bias", []int{c}, constant(0))
	if b.err != nil {
		return nil
	}
	n := b.n
	var st *bnStats
	if b.train {
		st = &bnStats{mean: make([]float32, c), vari: make([]float32, c)}
		for i := range st.vari {
			st.vari[i] = 1
		}
		n.stats = append(n.stats, st)
		n.buffers = append(n.buffers,
			Param{Name: name + ".running_mean", Shape: []int{c}, Value: st.mean},
			Param{Name: name + ".running_var", Shape: []int{c}, Value: st.vari})
		spatial := x.Shape().TotalSize() / (x.Shape()[0] * c)
		if n.minBNSpatial == 0 || spatial < n.minBNSpatial {
			n.minBNSpatial = spatial
		}
	} else {
		if b.si >= len(n.stats) || len(n.stats[b.si].mean) != c {
			b.fail(fmt.Errorf("%s: evaluation graph asks for BatchNorm statistics out of training order", name))
			return nil
		}
		st = n.stats[b.si]
		b.si++
	}
	y, err := batchNorm(x, gamma, beta, st, &n.st, b.train, relu)
	if !b.check(name, err) {
		return nil
	}
	return y
}

// linear is a fully connected layer on a (rows, in) input.
func (b *builder) linear(x *G.Node, name string, out int, bias bool) *G.Node {
	if b.err != nil {
		return nil
	}
	in := x.Shape()[1]
	w := b.param(name+".weight", []int{out, in}, fanInUniform(in))
	var bn *G.Node
	if bias {
		bn = b.param(name+".bias", []int{out}, fanInUniform(in))
	}
	if b.err != nil {
		return nil
	}
	y, err := linear(x, w, bn, !isData(x))
	if !b.check(name, err) {
		return nil
	}
	b.count(2 * float64(x.Shape()[0]) * float64(in*out))
	return y
}

func (b *builder) relu(x *G.Node) *G.Node {
	if b.err != nil {
		return nil
	}
	y, err := relu(x)
	if !b.check("relu", err) {
		return nil
	}
	return y
}

// addReLU is max(x + y, 0): a residual connection and its ReLU.
func (b *builder) addReLU(x, y *G.Node) *G.Node {
	if b.err != nil {
		return nil
	}
	z, err := addReLU(x, y)
	if !b.check("residual add", err) {
		return nil
	}
	return z
}

// maxPool is a 2×2, stride-2 max pool (floor mode, like PyTorch).
func (b *builder) maxPool(x *G.Node) *G.Node {
	if b.err != nil {
		return nil
	}
	y, err := maxPool2x2(x)
	if !b.check("maxpool", err) {
		return nil
	}
	return y
}

// globalAvgPool averages every channel over its spatial positions: (B, C, H, W) → (B, C).
// Gorgonia's GlobalAveragePool2D has a broken backward, and Mean over several axes divides twice,
// hence a reshape to (B, C, H·W) and a Mean over one axis.
func (b *builder) globalAvgPool(x *G.Node) *G.Node {
	if b.err != nil {
		return nil
	}
	s := x.Shape()
	hw := s[2] * s[3]
	if hw == 1 {
		return b.flatten(x)
	}
	r, err := G.Reshape(x, tensor.Shape{s[0], s[1], hw})
	if !b.check("global average pool", err) {
		return nil
	}
	y, err := G.Mean(r, 2)
	if !b.check("global average pool", err) {
		return nil
	}
	return y
}

// flatten reshapes (B, ...) to (B, rest).
func (b *builder) flatten(x *G.Node) *G.Node {
	if b.err != nil {
		return nil
	}
	s := x.Shape()
	if s.Dims() == 2 {
		return x
	}
	y, err := G.Reshape(x, tensor.Shape{s[0], s.TotalSize() / s[0]})
	if !b.check("flatten", err) {
		return nil
	}
	return y
}
