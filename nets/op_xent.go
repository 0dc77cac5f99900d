package nets

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	"github.com/ssfusion/ssfusion/internal/parallel"
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
	tgt *target
	st  *stepState
	k   int
	// dz is the gradient of the loss with respect to the logits, w_r·(softmax(z_r) - onehot),
	// computed by the forward while each row is in cache; the backward scales it by the incoming
	// gradient (1 in training) and hands it on.
	dz    buffer
	shape tensor.Shape

	loss    float64
	correct int
	// rowLoss holds each row's weighted loss, summed in row order afterwards so that the loss
	// does not depend on how the rows were split across cores; rowHit whether its arg-max is the
	// label.
	rowLoss []float64
	rowHit  []bool
}

func crossEntropy(logits *G.Node, tgt *target, st *stepState) (*G.Node, *xentOp, error) {
	s := logits.Shape()
	if s.Dims() != 2 || len(tgt.labels) != s[0] || len(tgt.weight) != s[0] {
		return nil, nil, fmt.Errorf("cross entropy: logits %v and %d targets do not match", s, len(tgt.labels))
	}
	op := &xentOp{opBase: opBase{name: "xent", arity: 1}, tgt: tgt, st: st, k: s[1], shape: s.Clone()}
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
	if rows != len(o.tgt.labels) || o.shape.TotalSize() != len(z) {
		return nil, fmt.Errorf("%s: %d rows of logits, %d targets", o.name, rows, len(o.tgt.labels))
	}
	if len(o.rowLoss) != rows {
		o.rowLoss, o.rowHit = make([]float64, rows), make([]bool, rows)
	}
	_, dz := o.dz.get(o.shape, false)
	parallel.For(rows, 8, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			o.rowLoss[r], o.rowHit[r] = 0, false
			zr := z[r*o.k : (r+1)*o.k]
			pr := dz[r*o.k : (r+1)*o.k]
			w := o.tgt.weight[r]
			if w == 0 {
				clear(pr) // a padding row: no loss, no gradient
				continue
			}
			mx := maxF32(zr)
			sum := expShiftSumVec(pr, zr, mx)
			scaleF32(pr, w*float32(1/sum))
			l := o.tgt.labels[r]
			pr[l] -= w
			o.rowLoss[r] = float64(w) * (math.Log(sum) - float64(zr[l]-mx))
			o.rowHit[r] = zr[l] == mx && firstMax(zr[:l], mx) < 0 // the label is the (first) arg-max
		}
	})
	o.loss, o.correct = 0, 0
	for r, l := range o.rowLoss {
		o.loss += l
		if o.rowHit[r] {
			o.correct++
		}
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

// firstMax returns the index of the first element of z equal to mx, its maximum, or -1.
func firstMax(z []float32, mx float32) int {
	for j, e := range z {
		if e == mx {
			return j
		}
	}
	return -1
}

// errNonFinite is returned by the loss op when the loss is NaN or infinite.
var errNonFinite = fmt.Errorf("loss is not finite")

// xentGradOp is dz = g·w_r·(softmax(z_r) - onehot(label_r)): it scales, in place, the forward's
// dz by g.
type xentGradOp struct {
	opBase
	fwd   *xentOp
	shape tensor.Shape
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
	t, dz := f.dz.get(o.shape, false)
	if g != 1 {
		parallel.For(len(dz), 1<<15, func(_, lo, hi int) {
			for j := lo; j < hi; j++ {
				dz[j] *= g
			}
		})
	}
	return t, nil
}

func (o *xentGradOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *xentGradOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}

// Constants of expf32: exp(x) = 2^n · exp(r) with n = round(x·log2(e)) and r = x - n·ln2 in
// [-ln2/2, ln2/2], where exp(r) is the Cephes expf polynomial (relative error < 1 ulp on r's range).
const (
	expLog2e  = 1.44269504088896341
	expLn2Hi  = 0.693359375         // ln2 with its low bits cut off, so n·expLn2Hi is exact
	expLn2Lo  = -2.12194440e-4      // ln2 - expLn2Hi
	expMagic  = 12582912.0          // 1.5·2^23: adding it rounds a float32 of magnitude < 2^22 to an integer
	expMaxArg = 88.72283172607422   // largest float32 whose exp is finite in float32
	expMinArg = -103.97208404541016 // below it exp rounds to 0 in float32
	expP0     = 1.9875691500e-4
	expP1     = 1.3981999507e-3
	expP2     = 8.3334519073e-3
	expP3     = 4.1665795894e-2
	expP4     = 1.6666665459e-1
	expP5     = 5.0000001201e-1
)

// expf32 is exp computed in float32, within 2 ulp of the correctly rounded result for normal
// results. exp(-Inf) = 0, exp(+Inf) = +Inf, exp(NaN) = NaN.
func expf32(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > expMaxArg:
		return float32(math.Inf(1))
	case x < expMinArg:
		return 0
	}
	t := x*expLog2e + expMagic
	n := int32(math.Float32bits(t)) - int32(math.Float32bits(expMagic))
	fn := t - expMagic
	r := x - fn*expLn2Hi
	r -= fn * expLn2Lo
	p := ((((expP0*r+expP1)*r+expP2)*r+expP3)*r+expP4)*r + expP5
	p = p*r*r + r + 1
	return expScale(p, n)
}

// expScale returns p·2^n for p in [0.7, 1.5] and n in [-150, 128].
func expScale(p float32, n int32) float32 {
	if n < -126 {
		// A subnormal result: scale in two steps so that only the last one rounds.
		p *= math.Float32frombits(uint32(n+126+127) << 23)
		return p * 0x1p-126
	}
	if n > 127 {
		return p * 2 * 0x1p127
	}
	return p * math.Float32frombits(uint32(n+127)<<23)
}

// expShiftSum sets dst[j] = exp(src[j] - mx) and returns the sum of dst, for mx >= every src[j]
// (so every argument is <= 0). It is expf32 inlined, except that results below the smallest normal
// float32 (arguments below -87.34) are flushed to 0. A NaN in src gives a NaN sum.
func expShiftSum(dst, src []float32, mx float32) float64 {
	dst = dst[:len(src)]
	// The constants live in locals so that the compiler keeps them in registers.
	log2e, magic, ln2hi, ln2lo := float32(expLog2e), float32(expMagic), float32(expLn2Hi), float32(expLn2Lo)
	p0, p1, p2, p3, p4, p5 := float32(expP0), float32(expP1), float32(expP2), float32(expP3), float32(expP4), float32(expP5)
	bias := math.Float32bits(magic) - 127
	var sum float64
	for j, z := range src {
		x := z - mx
		var e float32
		if !(x < -87.33654) {
			t := x*log2e + magic
			n := math.Float32bits(t) - bias
			fn := t - magic
			r := x - fn*ln2hi
			r -= fn * ln2lo
			p := ((((p0*r+p1)*r+p2)*r+p3)*r+p4)*r + p5
			p = p*r*r + r + 1
			e = p * math.Float32frombits(n<<23)
		}
		dst[j] = e
		sum += float64(e)
	}
	return sum
}
