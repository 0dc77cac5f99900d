package nets

import (
	"fmt"
	"hash"
	"hash/fnv"
	"math"

	"github.com/chewxy/hm"
	"github.com/ssfusion/ssfusion/kernels"
	"gonum.org/v1/gonum/blas"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The custom ops of this package follow two rules that keep them safe inside Gorgonia's register
// allocator, which reuses a register in place once its last reader has run:
//   - state an op keeps for its backward pass lives in op-private buffers that are never handed
//     to the graph as values, and
//   - an output buffer an op hands out may be reused by the op on the next run (saving the
//     allocation), because by then the machine has been Reset and nothing refers to it.
// Ops never write to their inputs.

// The products that reach the pure-Go fallback of kernels.Sgemm run on Gorgonia's BLAS, so that
// a BLAS installed with gorgonia.Use serves them as it serves Gorgonia's own ops.
func init() { kernels.FallbackBLAS = func() blas.Float32 { return G.WhichBLAS() } }

// GEMMKernel names the matrix-product code the models run (kernels.GEMMKernel), for the
// provenance of their results.
func GEMMKernel() string { return kernels.GEMMKernel() }

// opBase supplies the Op methods that are the same for every op of this package. Every op
// hashes by its own address: ops carry state, so Gorgonia's common-subexpression merging, which
// merges nodes with equal hashes and children, must never merge two of them.
type opBase struct {
	name  string
	arity int
	in    [][]float32 // inputs' last result, reused: Gorgonia runs an op's Do one at a time
}

func (o *opBase) Arity() int            { return o.arity }
func (o *opBase) ReturnsPtr() bool      { return false }
func (o *opBase) CallsExtern() bool     { return false }
func (o *opBase) OverwritesInput() int  { return -1 }
func (o *opBase) String() string        { return o.name }
func (o *opBase) WriteHash(h hash.Hash) { fmt.Fprintf(h, "nets.%s@%p", o.name, o) }
func (o *opBase) Hashcode() uint32 {
	h := fnv.New32a()
	o.WriteHash(h)
	return h.Sum32()
}

// fnType builds the Gorgonia type of an op taking tensors of the given ranks (0 = scalar) and
// returning one of rank out; all share one element type.
func fnType(out int, in ...int) hm.Type {
	a := hm.TypeVariable('a')
	ts := make([]hm.Type, 0, len(in)+1)
	for _, d := range append(in, out) {
		if d == 0 {
			ts = append(ts, a)
		} else {
			ts = append(ts, G.TensorType{Dims: d, Of: a})
		}
	}
	return hm.NewFnType(ts...)
}

// shapeOf returns the i-th input shape given to InferShape.
func shapeOf(ds []G.DimSizer, i int) (tensor.Shape, error) {
	if i >= len(ds) {
		return nil, fmt.Errorf("missing input %d", i)
	}
	s, ok := ds[i].(tensor.Shape)
	if !ok {
		return nil, fmt.Errorf("input %d: want a tensor.Shape, got %T", i, ds[i])
	}
	return s, nil
}

// floats returns the float32 elements of a dense value, materialising views.
func floats(v G.Value) ([]float32, error) {
	d, ok := v.(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("want *tensor.Dense, got %T", v)
	}
	if d.Dtype() != tensor.Float32 {
		return nil, fmt.Errorf("want float32, got %v", d.Dtype())
	}
	if d.IsMaterializable() {
		d = d.Materialize().(*tensor.Dense)
	}
	return d.Float32s()[:d.Shape().TotalSize()], nil
}

// scalar returns the value of a scalar float32 value.
func scalar(v G.Value) (float32, error) {
	switch s := v.(type) {
	case *G.F32:
		return float32(*s), nil
	case *tensor.Dense:
		if f, ok := s.Data().(float32); ok {
			return f, nil
		}
		if fs, ok := s.Data().([]float32); ok && len(fs) == 1 {
			return fs[0], nil
		}
	}
	return 0, fmt.Errorf("want a float32 scalar, got %T", v)
}

// inputs checks the number of values and returns their float32 elements.
func inputs(o *opBase, vs []G.Value) ([][]float32, error) {
	if len(vs) != o.arity {
		return nil, fmt.Errorf("%s: want %d inputs, got %d", o.name, o.arity, len(vs))
	}
	out := o.in[:0]
	for i, v := range vs {
		f, err := floats(v)
		if err != nil {
			return nil, fmt.Errorf("%s: input %d: %w", o.name, i, err)
		}
		out = append(out, f)
	}
	o.in = out
	return out, nil
}

// buffer is an op-owned output tensor reused across runs.
type buffer struct {
	t *tensor.Dense
}

// get returns the buffer as a tensor of the given shape, allocating it on first use. When zero
// is set the contents are cleared.
func (b *buffer) get(shape tensor.Shape, zero bool) (*tensor.Dense, []float32) {
	n := shape.TotalSize()
	if b.t == nil || b.t.Shape().TotalSize() != n {
		b.t = tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(shape.Clone()...))
		return b.t, b.t.Float32s()
	}
	if !b.t.Shape().Eq(shape) {
		// Gorgonia may have reshaped the tensor in place while it was a value of the graph.
		if err := b.t.Reshape(shape...); err != nil {
			b.t = tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(shape.Clone()...))
			return b.t, b.t.Float32s()
		}
	}
	f := b.t.Float32s()[:n]
	if zero {
		clear(f)
	}
	return b.t, f
}

// guard turns a panic inside an op into an error, because Gorgonia runs ops on a goroutine of its
// own where a panic cannot be recovered by the caller of RunAll.
func guard(name string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%s: panic: %v", name, r)
	}
}

// finite reports whether x is neither NaN nor infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// weightedGrads builds the gradient nodes of a layer y = f(x, W) [+ b] whose inputs are
// (x, W[, b]): dx = dxOp(W, dy) unless dxOp is nil (x is data), dW = dwOp(x, dy), and db as
// dy summed over everything but the channel axis.
func weightedGrads(in G.Nodes, grad *G.Node, dxOp, dwOp G.Op) (G.Nodes, error) {
	res := make(G.Nodes, len(in))
	var err error
	if dxOp != nil {
		if res[0], err = G.ApplyOp(dxOp, in[1], grad); err != nil {
			return nil, err
		}
	}
	if res[1], err = G.ApplyOp(dwOp, in[0], grad); err != nil {
		return nil, err
	}
	if len(in) == 3 {
		if res[2], err = channelSum(grad); err != nil {
			return nil, err
		}
	}
	return res, nil
}
