package nets

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	"github.com/ssfusion/ssfusion/internal/parallel"
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
// of a (B, C, ...) input, optionally followed by a ReLU (relu): fused, the ReLU costs no pass of
// its own over memory, forward or backward. In training it normalises with the statistics of the valid rows only
// (the first stepState.n rows), so that padding rows change neither the output of real rows nor
// the running statistics; in evaluation it uses the running statistics.
type bnOp struct {
	opBase
	st    *bnStats
	step  *stepState
	train bool
	relu  bool
	dims  int
	c     int

	// Saved by the training forward for the backward of the same step.
	n          int
	mean, istd []float32
	y          buffer

	// runs counts training forwards. The input gradient's op saves Σ dy and Σ dy·x̂ per channel
	// in sdy and sdyx, tagged with the forward it belongs to and the buffers it was computed from,
	// so that the gamma (and, with the ReLU, beta) gradient's op, which needs the same sums, can
	// skip a pass over x and dy when it runs after it (as Gorgonia's tape orders them).
	runs          int
	sdy, sdyx     []float64
	sumsRun       int
	sumsX, sumsDY *float32
}

// batchNorm applies BatchNorm to x, followed by a ReLU when relu is set.
func batchNorm(x, gamma, beta *G.Node, st *bnStats, step *stepState, train, relu bool) (*G.Node, error) {
	c := x.Shape()[1]
	if len(st.mean) != c || gamma.Shape().TotalSize() != c || beta.Shape().TotalSize() != c {
		return nil, fmt.Errorf("batchnorm: input %v, gamma %v, beta %v and %d statistics do not match", x.Shape(), gamma.Shape(), beta.Shape(), len(st.mean))
	}
	name := "batchnorm"
	if relu {
		name = "batchnorm+relu"
	}
	op := &bnOp{opBase: opBase{name: name, arity: 3}, st: st, step: step, train: train, relu: relu, dims: x.Dims(), c: c,
		mean: make([]float32, c), istd: make([]float32, c), sdy: make([]float64, c), sdyx: make([]float64, c)}
	return G.ApplyOp(op, x, gamma, beta)
}

// normalize sets y = x·a + b, or max(x·a + b, 0) with the ReLU.
func (o *bnOp) normalize(y, x []float32, a, b float32) {
	if o.relu {
		affineReLU(y, x, a, b)
		return
	}
	affine(y, x, a, b)
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
		parallel.Dynamic(o.c, o.c, func(_, _, lo, hi int) {
			for c := lo; c < hi; c++ {
				istd := float32(1 / math.Sqrt(float64(o.st.vari[c])+bnEps))
				a := gamma[c] * istd
				b := beta[c] - o.st.mean[c]*a
				for n := 0; n < nb; n++ {
					i := (n*o.c + c) * s
					o.normalize(y[i:i+s], x[i:i+s], a, b)
				}
			}
		})
		return t, nil
	}

	valid := min(max(o.step.n, 1), nb)
	cnt := valid * s
	o.n = valid
	o.runs++
	parallel.Dynamic(o.c, o.c, func(_, _, lo, hi int) {
		for c := lo; c < hi; c++ {
			var sum float64
			for n := 0; n < valid; n++ {
				i := (n*o.c + c) * s
				sum += float64(sumF32(x[i : i+s]))
			}
			mean := sum / float64(cnt)
			var sq float64
			m32 := float32(mean)
			for n := 0; n < valid; n++ {
				i := (n*o.c + c) * s
				sq += float64(sumSqDev(x[i:i+s], m32))
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
				o.normalize(y[i:i+s], x[i:i+s], a, b)
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
	// With the ReLU the gradient ops also read the output, whose sign masks dy.
	dxIn, sumIn := G.Nodes{in[0], in[1], grad}, G.Nodes{in[0], grad}
	if o.relu {
		dxIn, sumIn = append(dxIn, out), append(sumIn, out)
	}
	dx, err := G.ApplyOp(&bnDXOp{opBase: opBase{name: o.name + ".dx", arity: len(dxIn)}, fwd: o}, dxIn...)
	if err != nil {
		return nil, err
	}
	dg, err := G.ApplyOp(&bnDParamOp{opBase: opBase{name: o.name + ".dgamma", arity: len(sumIn)}, fwd: o, gamma: true}, sumIn...)
	if err != nil {
		return nil, err
	}
	var db *G.Node
	if o.relu {
		db, err = G.ApplyOp(&bnDParamOp{opBase: opBase{name: o.name + ".dbeta", arity: len(sumIn)}, fwd: o}, sumIn...)
	} else {
		db, err = channelSum(grad)
	}
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx, dg, db}, nil
}

// sums returns, for channel c, Σ dy and Σ dy·x̂ over all rows: padding rows have zero
// gradient in practice, but their outputs do depend on the statistics, so they belong to the
// exact derivative. With the ReLU, dy is first masked by the output y; when masked is not nil
// the masked dy is also written there.
func (o *bnOp) sums(masked, x, dy, y []float32, nb, s, c int) (sdy, sdyx float64) {
	m, is := o.mean[c], o.istd[c]
	for n := 0; n < nb; n++ {
		i := (n*o.c + c) * s
		var p, q float32
		switch {
		case !o.relu:
			p, q = sumDyDev(dy[i:i+s], x[i:i+s], m)
		case masked != nil:
			p, q = maskSumDyDev(masked[i:i+s], dy[i:i+s], y[i:i+s], x[i:i+s], m)
		default:
			p, q = sumMaskedDyDev(dy[i:i+s], y[i:i+s], x[i:i+s], m)
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

func (o *bnDXOp) Type() hm.Type {
	d := o.fwd.dims
	if o.arity == 4 {
		return fnType(d, d, 1, d, d)
	}
	return fnType(d, d, 1, d)
}

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
	var y []float32
	if f.relu {
		y = in[3]
	}
	shape := vs[0].Shape()
	nb := shape[0]
	s := len(x) / (nb * f.c)
	t, dx := o.dx.get(shape, false)
	cnt := float64(f.n * s)
	// With the ReLU, sums leaves the masked dy in dx, which the second pass then reads in place.
	g := dy
	if f.relu {
		g = dx
	}
	parallel.Dynamic(f.c, f.c, func(_, _, lo, hi int) {
		for c := lo; c < hi; c++ {
			sdy, sdyx := f.sums(dx, x, dy, y, nb, s, c)
			f.sdy[c], f.sdyx[c] = sdy, sdyx
			m, is := f.mean[c], f.istd[c]
			a := gamma[c] * is
			mdy := float32(sdy / cnt)
			mdyx := float32(sdyx / cnt)
			for n := 0; n < nb; n++ {
				i := (n*f.c + c) * s
				if n >= f.n {
					for k, v := range g[i : i+s] {
						dx[i+k] = a * v
					}
					continue
				}
				bnGrad(dx[i:i+s], g[i:i+s], x[i:i+s], m, is, a, mdy, mdyx)
			}
		}
	})
	f.sumsRun, f.sumsX, f.sumsDY = f.runs, first(x), first(dy)
	return t, nil
}

func (o *bnDXOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *bnDXOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}

// bnDParamOp is the gradient of gamma, Σ dy·x̂ per channel, or (without gamma) of beta, Σ dy,
// from the inputs (x, dy) or, with the ReLU, (x, dy, y).
type bnDParamOp struct {
	opBase
	fwd   *bnOp
	gamma bool
	dp    buffer
}

func (o *bnDParamOp) Type() hm.Type {
	d := o.fwd.dims
	if o.arity == 3 {
		return fnType(1, d, d, d)
	}
	return fnType(1, d, d)
}

func (o *bnDParamOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{o.fwd.c}, nil
}

func (o *bnDParamOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	f := o.fwd
	x, dy := in[0], in[1]
	var y []float32
	if f.relu {
		y = in[2]
	}
	nb := vs[0].Shape()[0]
	s := len(x) / (nb * f.c)
	t, dp := o.dp.get(tensor.Shape{f.c}, false)
	pick := func(sdy, sdyx float64) float32 {
		if o.gamma {
			return float32(sdyx)
		}
		return float32(sdy)
	}
	if f.sumsRun == f.runs && f.sumsX == first(x) && f.sumsDY == first(dy) {
		for c := range dp {
			dp[c] = pick(f.sdy[c], f.sdyx[c])
		}
		return t, nil
	}
	parallel.Dynamic(f.c, f.c, func(_, _, lo, hi int) {
		for c := lo; c < hi; c++ {
			dp[c] = pick(f.sums(nil, x, dy, y, nb, s, c))
		}
	})
	return t, nil
}

// first identifies a buffer by its first element (nil when empty).
func first(v []float32) *float32 {
	if len(v) == 0 {
		return nil
	}
	return &v[0]
}

func (o *bnDParamOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *bnDParamOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}

// The per-channel loops below keep eight partial sums: a single running float32 sum waits on
// the latency of every addition, eight independent ones let the additions overlap (about 2.5×
// faster). The result differs from the sequential sum only by float32 rounding. Where the CPU
// has AVX-512 they run as the vector loops of bn_amd64.s (bnVector), 16 partial sums, which
// keep the sums of the masked and unmasked gradient equal to each other in the same way.

// sumF32 returns Σ x.
func sumF32(x []float32) float32 {
	if bnVector && len(x) > 0 {
		return sumVec(&x[0], len(x))
	}
	var p [8]float32
	i := 0
	for ; i+8 <= len(x); i += 8 {
		v := (*[8]float32)(x[i:])
		p[0] += v[0]
		p[1] += v[1]
		p[2] += v[2]
		p[3] += v[3]
		p[4] += v[4]
		p[5] += v[5]
		p[6] += v[6]
		p[7] += v[7]
	}
	for ; i < len(x); i++ {
		p[0] += x[i]
	}
	return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))
}

// sumSqDev returns Σ (x-m)².
func sumSqDev(x []float32, m float32) float32 {
	if bnVector && len(x) > 0 {
		return sumSqDevVec(&x[0], len(x), m)
	}
	var p [8]float32
	i := 0
	for ; i+8 <= len(x); i += 8 {
		v := (*[8]float32)(x[i:])
		d0, d1, d2, d3 := v[0]-m, v[1]-m, v[2]-m, v[3]-m
		d4, d5, d6, d7 := v[4]-m, v[5]-m, v[6]-m, v[7]-m
		p[0] += d0 * d0
		p[1] += d1 * d1
		p[2] += d2 * d2
		p[3] += d3 * d3
		p[4] += d4 * d4
		p[5] += d5 * d5
		p[6] += d6 * d6
		p[7] += d7 * d7
	}
	for ; i < len(x); i++ {
		d := x[i] - m
		p[0] += d * d
	}
	return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))
}

// sumDyDev returns Σ dy and Σ dy·(x-m), four partial sums each.
func sumDyDev(dy, x []float32, m float32) (sdy, sdyx float32) {
	x = x[:len(dy)]
	if bnVector && len(dy) > 0 {
		return sumDyDevVec(&dy[0], &dy[0], &dy[0], &x[0], len(dy), m, 0)
	}
	var p, q [4]float32
	i := 0
	for ; i+4 <= len(dy); i += 4 {
		g, v := (*[4]float32)(dy[i:]), (*[4]float32)(x[i:])
		p[0] += g[0]
		p[1] += g[1]
		p[2] += g[2]
		p[3] += g[3]
		q[0] += g[0] * (v[0] - m)
		q[1] += g[1] * (v[1] - m)
		q[2] += g[2] * (v[2] - m)
		q[3] += g[3] * (v[3] - m)
	}
	for ; i < len(dy); i++ {
		p[0] += dy[i]
		q[0] += dy[i] * (x[i] - m)
	}
	return (p[0] + p[1]) + (p[2] + p[3]), (q[0] + q[1]) + (q[2] + q[3])
}

// sumMaskedDyDev returns Σ g and Σ g·(x-m) where g is dy masked by y > 0 as reluBackward masks
// it, summed in sumDyDev's order, so that both ways of computing BatchNorm's parameter gradients
// give the same bits.
func sumMaskedDyDev(dy, y, x []float32, m float32) (sdy, sdyx float32) {
	y, x = y[:len(dy)], x[:len(dy)]
	if bnVector && len(dy) > 0 {
		return sumDyDevVec(&dy[0], &dy[0], &y[0], &x[0], len(dy), m, 1)
	}
	var p, q [4]float32
	i := 0
	for ; i+4 <= len(dy); i += 4 {
		d, v, e := (*[4]float32)(dy[i:]), (*[4]float32)(y[i:]), (*[4]float32)(x[i:])
		for k := range 4 {
			g := masked(d[k], v[k])
			p[k] += g
			q[k] += g * (e[k] - m)
		}
	}
	for ; i < len(dy); i++ {
		g := masked(dy[i], y[i])
		p[0] += g
		q[0] += g * (x[i] - m)
	}
	return (p[0] + p[1]) + (p[2] + p[3]), (q[0] + q[1]) + (q[2] + q[3])
}

// maskSumDyDev sets g to dy masked by y > 0 and returns sumMaskedDyDev's sums, in one pass.
func maskSumDyDev(g, dy, y, x []float32, m float32) (sdy, sdyx float32) {
	g, y, x = g[:len(dy)], y[:len(dy)], x[:len(dy)]
	if bnVector && len(dy) > 0 {
		return sumDyDevVec(&g[0], &dy[0], &y[0], &x[0], len(dy), m, 3)
	}
	var p, q [4]float32
	i := 0
	for ; i+4 <= len(dy); i += 4 {
		d, v, e, o := (*[4]float32)(dy[i:]), (*[4]float32)(y[i:]), (*[4]float32)(x[i:]), (*[4]float32)(g[i:])
		for k := range 4 {
			gk := masked(d[k], v[k])
			o[k] = gk
			p[k] += gk
			q[k] += gk * (e[k] - m)
		}
	}
	for ; i < len(dy); i++ {
		gk := masked(dy[i], y[i])
		g[i] = gk
		p[0] += gk
		q[0] += gk * (x[i] - m)
	}
	return (p[0] + p[1]) + (p[2] + p[3]), (q[0] + q[1]) + (q[2] + q[3])
}

// masked is dy where y > 0 and 0 elsewhere (also where y is NaN), as reluBackward computes it.
func masked(dy, y float32) float32 {
	v := math.Float32bits(dy)
	if math.Float32bits(y)-1 >= 0x7f800000 {
		v = 0
	}
	return math.Float32frombits(v)
}

// affine sets y = x·a + b.
func affine(y, x []float32, a, b float32) {
	y = y[:len(x)]
	if bnVector && len(x) > 0 {
		affineVec(&y[0], &x[0], len(x), a, b, false)
		return
	}
	for i, e := range x {
		y[i] = e*a + b
	}
}

// affineReLU sets y = max(x·a + b, 0), branch-free like reluForward.
func affineReLU(y, x []float32, a, b float32) {
	y = y[:len(x)]
	if bnVector && len(x) > 0 {
		affineVec(&y[0], &x[0], len(x), a, b, true)
		return
	}
	for i, e := range x {
		u := math.Float32bits(e*a + b)
		if u-0x80000000 <= 0x7f800000 {
			u = 0
		}
		y[i] = math.Float32frombits(u)
	}
}

// bnGrad sets dx = a·(dy - mdy - x̂·mdyx) with x̂ = (x-m)·is.
func bnGrad(dx, dy, x []float32, m, is, a, mdy, mdyx float32) {
	dx, x = dx[:len(dy)], x[:len(dy)]
	if bnVector && len(dy) > 0 {
		bnGradVec(&dx[0], &dy[0], &x[0], len(dy), m, is, a, mdy, mdyx)
		return
	}
	for i, g := range dy {
		xh := (x[i] - m) * is
		dx[i] = a * (g - mdy - xh*mdyx)
	}
}
