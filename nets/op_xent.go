package nets

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// target holds one batch's labels and row weights, filled by the model before each run. A row's
// weight is 1/count for valid rows and 0 for padding, so the loss is a mean over valid rows.
type target struct {
	labels []int32
	weight []float32
}

// xentOp is the softmax cross-entropy Σ_r w_r·(logsumexp(z_r) - z_r[label_r]) of logits z (R, K).
// It also records the loss in float64, and the number of valid rows whose arg-max is the label,
// because intermediate values of a Gorgonia graph may be overwritten before RunAll returns.
type xentOp struct {
	opBase
	tgt   *target
	st    *stepState
	k     int
	probs []float32

	loss    float64
	correct int
	parts   []xentPart
}

type xentPart struct {
	loss    float64
	correct int
}

func crossEntropy(logits *G.Node, tgt *target, st *stepState) (*G.Node, *xentOp, error) {
	s := logits.Shape()
	if s.Dims() != 2 || len(tgt.labels) != s[0] || len(tgt.weight) != s[0] {
		return nil, nil, fmt.Errorf("cross entropy: logits %v and %d targets do not match", s, len(tgt.labels))
	}
	op := &xentOp{opBase: opBase{name: "xent", arity: 1}, tgt: tgt, st: st, k: s[1], probs: make([]float32, s.TotalSize())}
	n, err := G.ApplyOp(op, logits)
	return n, op, err
}

func (o *xentOp) Type() hm.Type { return fnType(0, 2) }

func (o *xentOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return tensor.ScalarShape(), nil }

func (o *xentOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	z := in[0]
	rows := len(z) / o.k
	if rows != len(o.tgt.labels) || len(o.probs) != len(z) {
		return nil, fmt.Errorf("%s: %d rows of logits, %d targets", o.name, rows, len(o.tgt.labels))
	}
	k := chunks(rows, 8)
	if len(o.parts) < k {
		o.parts = make([]xentPart, k)
	}
	parallel(rows, 8, func(chunk, lo, hi int) {
		var part xentPart
		for r := lo; r < hi; r++ {
			zr := z[r*o.k : (r+1)*o.k]
			pr := o.probs[r*o.k : (r+1)*o.k]
			arg, mx := 0, zr[0]
			for j, e := range zr {
				if e > mx {
					arg, mx = j, e
				}
			}
			var sum float64
			for j, e := range zr {
				p := math.Exp(float64(e - mx))
				pr[j] = float32(p)
				sum += p
			}
			inv := float32(1 / sum)
			for j := range pr {
				pr[j] *= inv
			}
			w := o.tgt.weight[r]
			if w == 0 {
				continue
			}
			l := o.tgt.labels[r]
			part.loss += float64(w) * (math.Log(sum) - float64(zr[l]-mx))
			if int(l) == arg {
				part.correct++
			}
		}
		o.parts[chunk] = part
	})
	o.loss, o.correct = 0, 0
	for _, p := range o.parts[:k] {
		o.loss += p.loss
		o.correct += p.correct
	}
	if !finite(o.loss) {
		// Stopping here keeps the backward pass (and the hooks) from running on a broken loss.
		return nil, errNonFinite
	}
	return G.NewF32(float32(o.loss)), nil
}

func (o *xentOp) DiffWRT(n int) []bool { return []bool{true}[:n] }

func (o *xentOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	// The loss node is an input so that the backward is ordered after the forward, whose
	// probabilities it reads: the incoming gradient is a constant that orders nothing.
	d, err := G.ApplyOp(&xentGradOp{opBase: opBase{name: "xent.dz", arity: 2}, fwd: o, shape: in[0].Shape().Clone()}, out, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{d}, nil
}

// errNonFinite is returned by the loss op when the loss is NaN or infinite.
var errNonFinite = fmt.Errorf("loss is not finite")

// xentGradOp is dz = g·w_r·(softmax(z_r) - onehot(label_r)).
type xentGradOp struct {
	opBase
	fwd   *xentOp
	shape tensor.Shape
	dz    buffer
}

func (o *xentGradOp) Type() hm.Type { return fnType(2, 0, 0) }

func (o *xentGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return o.shape.Clone(), nil }

func (o *xentGradOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	if len(vs) != 2 {
		return nil, fmt.Errorf("%s: want 2 inputs, got %d", o.name, len(vs))
	}
	g, err := scalar(vs[1])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.name, err)
	}
	f := o.fwd
	f.st.bwdOps++
	t, dz := o.dz.get(o.shape, false)
	rows := len(f.tgt.labels)
	parallel(rows, 8, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			d := dz[r*f.k : (r+1)*f.k]
			w := f.tgt.weight[r]
			if w == 0 {
				clear(d)
				continue
			}
			a := g * w
			for j, p := range f.probs[r*f.k : (r+1)*f.k] {
				d[j] = a * p
			}
			d[f.tgt.labels[r]] -= a
		}
	})
	return t, nil
}

func (o *xentGradOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *xentGradOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}
