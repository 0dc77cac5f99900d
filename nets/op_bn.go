package nets

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

const (
	bnMomentum = 0.1 // PyTorch's: running = (1-m)·running + m·batch
	bnEps      = 1e-5
)

// bnStats is one BatchNorm layer's running statistics, shared by its training-graph op (which
// updates them) and its evaluation-graph op (which reads them). Gorgonia's own BatchNormOp is not
// used: every NewTapeMachine resets its statistics, and its train/eval flag lives in the op, which
// would then have to be flipped back and forth around each evaluation.
type bnStats struct {
	mean, vari []float32
}

// bnOp is BatchNorm with its affine transform: y = γ·(x-μ)/√(σ²+ε) + β over the channel axis 1
// of a (B, C, ...) input. In training it normalises with the statistics of the valid rows only
// (the first stepState.n rows), so that padding rows change neither the output of real rows nor
// the running statistics; in evaluation it uses the running statistics.
type bnOp struct {
	opBase
	st    *bnStats
	step  *stepState
	train bool
	dims  int
	c     int

	// Saved by the training forward for the backward of the same step.
	n          int
	mean, istd []float32
	y          buffer
}

func batchNorm(x, gamma, beta *G.Node, st *bnStats, step *stepState, train bool) (*G.Node, error) {
	c := x.Shape()[1]
	if len(st.mean) != c || gamma.Shape().TotalSize() != c || beta.Shape().TotalSize() != c {
		return nil, fmt.Errorf("batchnorm: input %v, gamma %v, beta %v and %d statistics do not match", x.Shape(), gamma.Shape(), beta.Shape(), len(st.mean))
	}
	op := &bnOp{opBase: opBase{name: "batchnorm", arity: 3}, st: st, step: step, train: train, dims: x.Dims(), c: c,
		mean: make([]float32, c), istd: make([]float32, c)}
	return G.ApplyOp(op, x, gamma, beta)
}

func (o *bnOp) Type() hm.Type { return fnType(o.dims, o.dims, 1, 1) }

func (o *bnOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf(ds, 0)
	if err != nil {
		return nil, err
	}
	return s.Clone(), nil
}

func (o *bnOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	x, gamma, beta := in[0], in[1], in[2]
	shape := vs[0].Shape()
	nb := shape[0]
	s := len(x) / (nb * o.c)
	t, y := o.y.get(shape, false)
	if !o.train {
		parallel(o.c, 1, func(_, lo, hi int) {
			for c := lo; c < hi; c++ {
				istd := float32(1 / math.Sqrt(float64(o.st.vari[c])+bnEps))
				a := gamma[c] * istd
				b := beta[c] - o.st.mean[c]*a
				for n := 0; n < nb; n++ {
					i := (n*o.c + c) * s
					for k, e := range x[i : i+s] {
						y[i+k] = e*a + b
					}
				}
			}
		})
		return t, nil
	}

	valid := min(max(o.step.n, 1), nb)
	cnt := valid * s
	o.n = valid
	parallel(o.c, 1, func(_, lo, hi int) {
		for c := lo; c < hi; c++ {
			var sum float64
			for n := 0; n < valid; n++ {
				i := (n*o.c + c) * s
				var part float32
				for _, e := range x[i : i+s] {
					part += e
				}
				sum += float64(part)
			}
			mean := sum / float64(cnt)
			var sq float64
			m32 := float32(mean)
			for n := 0; n < valid; n++ {
				i := (n*o.c + c) * s
				var part float32
				for _, e := range x[i : i+s] {
					d := e - m32
					part += d * d
				}
				sq += float64(part)
			}
			vari := sq / float64(cnt)
			istd := 1 / math.Sqrt(vari+bnEps)
			o.mean[c], o.istd[c] = m32, float32(istd)

			unbiased := vari
			if cnt > 1 {
				unbiased = sq / float64(cnt-1)
			}
			o.st.mean[c] = float32((1-bnMomentum)*float64(o.st.mean[c]) + bnMomentum*mean)
			o.st.vari[c] = float32((1-bnMomentum)*float64(o.st.vari[c]) + bnMomentum*unbiased)

			a := gamma[c] * float32(istd)
			b := beta[c] - m32*a
			for n := 0; n < nb; n++ {
				i := (n*o.c + c) * s
				for k, e := range x[i : i+s] {
					y[i+k] = e*a + b
				}
			}
		}
	})
	return t, nil
}

func (o *bnOp) DiffWRT(n int) []bool { return []bool{true, true, true}[:n] }

func (o *bnOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	if !o.train {
		return nil, fmt.Errorf("%s: evaluation-mode BatchNorm has no backward", o.name)
	}
	dx, err := G.ApplyOp(&bnDXOp{opBase: opBase{name: "batchnorm.dx", arity: 3}, fwd: o}, in[0], in[1], grad)
	if err != nil {
		return nil, err
	}
	dg, err := G.ApplyOp(&bnDGammaOp{opBase: opBase{name: "batchnorm.dgamma", arity: 2}, fwd: o}, in[0], grad)
	if err != nil {
		return nil, err
	}
	db, err := channelSum(grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx, dg, db}, nil
}

// sums returns, for channel c, Σ dy and Σ dy·x̂ over all rows: padding rows have zero
// gradient in practice, but their outputs do depend on the statistics, so they belong to the
// exact derivative.
func (o *bnOp) sums(x, dy []float32, nb, s, c int) (sdy, sdyx float64) {
	m, is := o.mean[c], o.istd[c]
	for n := 0; n < nb; n++ {
		i := (n*o.c + c) * s
		var p, q float32
		for k, g := range dy[i : i+s] {
			p += g
			q += g * (x[i+k] - m)
		}
		sdy += float64(p)
		sdyx += float64(q)
	}
	return sdy, sdyx * float64(is)
}

// bnDXOp is the input gradient of training-mode BatchNorm.
type bnDXOp struct {
	opBase
	fwd *bnOp
	dx  buffer
}

func (o *bnDXOp) Type() hm.Type { return fnType(o.fwd.dims, o.fwd.dims, 1, o.fwd.dims) }

func (o *bnDXOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf(ds, 0)
	if err != nil {
		return nil, err
	}
	return s.Clone(), nil
}

func (o *bnDXOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	f := o.fwd
	f.step.bwdOps++
	x, gamma, dy := in[0], in[1], in[2]
	shape := vs[0].Shape()
	nb := shape[0]
	s := len(x) / (nb * f.c)
	t, dx := o.dx.get(shape, false)
	cnt := float64(f.n * s)
	parallel(f.c, 1, func(_, lo, hi int) {
		for c := lo; c < hi; c++ {
			sdy, sdyx := f.sums(x, dy, nb, s, c)
			m, is := f.mean[c], f.istd[c]
			a := gamma[c] * is
			mdy := float32(sdy / cnt)
			mdyx := float32(sdyx / cnt)
			for n := 0; n < nb; n++ {
				i := (n*f.c + c) * s
				if n >= f.n {
					for k, g := range dy[i : i+s] {
						dx[i+k] = a * g
					}
					continue
				}
				for k, g := range dy[i : i+s] {
					xh := (x[i+k] - m) * is
					dx[i+k] = a * (g - mdy - xh*mdyx)
				}
			}
		}
	})
	return t, nil
}

func (o *bnDXOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *bnDXOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}

// bnDGammaOp is Σ dy·x̂ per channel.
type bnDGammaOp struct {
	opBase
	fwd *bnOp
	dg  buffer
}

func (o *bnDGammaOp) Type() hm.Type { return fnType(1, o.fwd.dims, o.fwd.dims) }

func (o *bnDGammaOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{o.fwd.c}, nil
}

func (o *bnDGammaOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	f := o.fwd
	x, dy := in[0], in[1]
	nb := vs[0].Shape()[0]
	s := len(x) / (nb * f.c)
	t, dg := o.dg.get(tensor.Shape{f.c}, false)
	parallel(f.c, 1, func(_, lo, hi int) {
		for c := lo; c < hi; c++ {
			_, sdyx := f.sums(x, dy, nb, s, c)
			dg[c] = float32(sdyx)
		}
	})
	return t, nil
}

func (o *bnDGammaOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *bnDGammaOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}
