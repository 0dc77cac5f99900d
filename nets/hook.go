package nets

import (
	"fmt"

	"github.com/chewxy/hm"
	"github.com/ssfusion/ssfusion/internal/parallel"
	"gonum.org/v1/gonum/blas/gonum"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// stepState is what the ops of one model share during a run: set by the model before RunAll,
// read by the ops on Gorgonia's goroutine while the model waits.
type stepState struct {
	n    int      // valid rows of the batch
	hook GradHook // nil: no hook

	// bwdOps counts backward kernels of this package's ops that ran in the current step; tests
	// use it to see where in the backward pass a hook fired.
	bwdOps int
}

// hookOp is the identity placed between a parameter and its uses in the training graph. Its
// derivative is where the parameter's gradient becomes complete during backward: it calls the
// hook, then adds what the hook left into Param.Grad.
//
// The forward copies the parameter into a scratch buffer instead of passing the parameter's own
// tensor through: Gorgonia's register allocator may run an op in place on a value that it
// believes is dead, and it does not know that this value is the model's weights.
type hookOp struct {
	opBase
	id    int
	shape tensor.Shape
	grad  []float32
	st    *stepState
	out   buffer
}

func newHookOp(id int, name string, shape tensor.Shape, grad []float32, st *stepState) *hookOp {
	return &hookOp{opBase: opBase{name: "hook(" + name + ")", arity: 1}, id: id, shape: shape, grad: grad, st: st}
}

func (o *hookOp) Type() hm.Type { return fnType(len(o.shape), len(o.shape)) }

func (o *hookOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) { return o.shape.Clone(), nil }

func (o *hookOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	t, out := o.out.get(o.shape, false)
	src := in[0][:len(out)]
	parallel.For(len(out), hookChunk, func(_, lo, hi int) { copy(out[lo:hi], src[lo:hi]) })
	return t, nil
}

func (o *hookOp) DiffWRT(int) []bool { return []bool{true} }

func (o *hookOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	d := &hookGradOp{opBase: opBase{name: o.name + "'", arity: 1}, fwd: o}
	n, err := G.ApplyOp(d, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{n}, nil
}

// hookGradOp announces the gradient and accumulates it into Param.Grad. Its output is the
// (possibly overwritten) gradient itself; nothing in the graph reads it.
type hookGradOp struct {
	opBase
	fwd *hookOp
}

func (o *hookGradOp) Type() hm.Type { return fnType(len(o.fwd.shape), len(o.fwd.shape)) }

func (o *hookGradOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	return o.fwd.shape.Clone(), nil
}

func (o *hookGradOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	g := in[0]
	if len(g) != len(o.fwd.grad) {
		return nil, fmt.Errorf("%s: gradient has %d elements, parameter %d", o.name, len(g), len(o.fwd.grad))
	}
	if h := o.fwd.st.hook; h != nil {
		if err := callHook(h, o.fwd.id, g); err != nil {
			return nil, fmt.Errorf("%s: %w", o.name, err)
		}
	}
	acc := o.fwd.grad
	parallel.For(len(g), hookChunk, func(_, lo, hi int) { accumulate(acc[lo:hi], g[lo:hi]) })
	return vs[0], nil
}

// hookChunk is the fewest elements worth a goroutine of the hook ops' copies and sums: below it,
// the small parameters (biases, LSTM gates of small models) stay on the op's goroutine.
const hookChunk = 1 << 15

// accumulate does acc[i] += g[i], with Gonum's vector axpy (alpha 1 multiplies exactly, so the
// sums are those of a loop).
func accumulate(acc, g []float32) {
	gonum.Implementation{}.Saxpy(len(g), 1, g, 1, acc[:len(g)], 1)
}

func (o *hookGradOp) DiffWRT(int) []bool { return []bool{false} }

func (o *hookGradOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}

// callHook runs a user hook, turning its panic into an error.
func callHook(h GradHook, id int, g []float32) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("gradient hook panicked: %v", r)
		}
	}()
	h(id, g)
	return nil
}
