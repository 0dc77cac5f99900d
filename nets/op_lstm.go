package nets

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	"github.com/ssfusion/ssfusion/internal/parallel"
	"github.com/ssfusion/ssfusion/kernels"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// lstmOp runs one LSTM layer over a whole sequence, PyTorch's cell with gate order i, f, g, o:
//
//	gates_t = pre_t + b_ih + b_hh + h_{t-1}·W_hhᵀ,  c_t = σ(f)·c_{t-1} + σ(i)·tanh(g),  h_t = σ(o)·tanh(c_t)
//
// where pre = x·W_ihᵀ is computed for all steps at once outside the op. Input and output
// rows are time-major: row t·B+b is stream b at step t. One op per layer instead of a graph of
// per-step Slice/Sigmoid/Tanh/Mul nodes keeps the graph small and runs the recurrence without
// Gorgonia's per-node allocations; the backward is BPTT over the same saved activations.
//
// The initial state (h0, c0) is op state, not a graph input: it is carried from one run to the
// next by commit, and no gradient flows into it (truncated BPTT).
type lstmOp struct {
	opBase
	st      *stepState
	t, b, h int

	h0, c0 []float32 // carried state used by the next run
	hT, cT []float32 // final state of the last run, adopted by commit

	whhT []float32 // (H, 4H) W_hhᵀ, so that the step's product reads it in place, unpacked
	bias []float32 // b_ih + b_hh

	// Saved by the forward for the backward.
	gates []float32 // (T·B, 4H) activated gates
	cs    []float32 // (T·B, H) cell states
	tcs   []float32 // (T·B, H) tanh of the cell states
	hprev []float32 // (T·B, H) h_{t-1} for every step
	cprev []float32 // (B, H) c0 of the run
	out   buffer
}

func lstmLayer(pre, whh, bih, bhh *G.Node, seq, batch int, st *stepState) (*G.Node, *lstmOp, error) {
	ws := whh.Shape()
	if ws.Dims() != 2 || ws[0] != 4*ws[1] || pre.Dims() != 2 || pre.Shape()[0] != seq*batch || pre.Shape()[1] != ws[0] ||
		bih.Shape().TotalSize() != ws[0] || bhh.Shape().TotalSize() != ws[0] {
		return nil, nil, fmt.Errorf("lstm: pre-activations %v, W_hh %v, b_ih %v and b_hh %v do not match", pre.Shape(), ws, bih.Shape(), bhh.Shape())
	}
	h := ws[1]
	op := &lstmOp{
		opBase: opBase{name: "lstm", arity: 4}, st: st, t: seq, b: batch, h: h,
		h0: make([]float32, batch*h), c0: make([]float32, batch*h),
		hT: make([]float32, batch*h), cT: make([]float32, batch*h),
		whhT: make([]float32, 4*h*h), bias: make([]float32, 4*h),
		gates: make([]float32, seq*batch*4*h), cs: make([]float32, seq*batch*h), tcs: make([]float32, seq*batch*h),
		hprev: make([]float32, seq*batch*h), cprev: make([]float32, batch*h),
	}
	n, err := G.ApplyOp(op, pre, whh, bih, bhh)
	return n, op, err
}

// reset zeroes the carried state.
func (o *lstmOp) reset() {
	clear(o.h0)
	clear(o.c0)
}

// commit carries the final state of the last run into the next one.
func (o *lstmOp) commit() {
	copy(o.h0, o.hT)
	copy(o.c0, o.cT)
}

func (o *lstmOp) Type() hm.Type { return fnType(2, 2, 2, 1, 1) }

func (o *lstmOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{o.t * o.b, o.h}, nil
}

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

func tanh32(x float32) float32 { return float32(math.Tanh(float64(x))) }

// Do runs the recurrence. Streams (batch rows) are independent, so they are split across cores
// for the whole sequence, with no synchronisation between steps; each row's arithmetic is the
// same whatever the split, so the result does not depend on the number of cores.
func (o *lstmOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	pre, whh, bih, bhh := in[0], in[1], in[2], in[3]
	h, b, h4 := o.h, o.b, 4*o.h
	if len(pre) != o.t*b*h4 || len(whh) != h4*h || len(bih) != h4 || len(bhh) != h4 {
		return nil, fmt.Errorf("%s: inputs of %d, %d, %d and %d values", o.name, len(pre), len(whh), len(bih), len(bhh))
	}
	for j := range o.bias {
		o.bias[j] = bih[j] + bhh[j]
	}
	t, hs := o.out.get(tensor.Shape{o.t * b, h}, false)
	transposeInto(o.whhT, whh, h4, h)
	copy(o.cprev, o.c0)
	parallel.For(b, 1, func(_, lo, hi int) { o.forwardRows(pre, hs, lo, hi) })
	last := (o.t - 1) * b * h
	copy(o.hT, hs[last:])
	copy(o.cT, o.cs[last:])
	return t, nil
}

// transposeInto sets dst (cols, rows) to the transpose of src (rows, cols).
func transposeInto(dst, src []float32, rows, cols int) {
	dst = dst[:rows*cols]
	for i := 0; i < rows; i++ {
		for j, v := range src[i*cols : (i+1)*cols] {
			dst[j*rows+i] = v
		}
	}
}

// forwardRows runs the recurrence of streams [lo, hi) over the whole sequence.
func (o *lstmOp) forwardRows(pre, hs []float32, lo, hi int) {
	h, b, h4, n := o.h, o.b, 4*o.h, hi-lo
	hp, cp := o.h0[lo*h:hi*h], o.cprev[lo*h:hi*h]
	for s := 0; s < o.t; s++ {
		r0 := s*b + lo // first row of this step's block
		gt := o.gates[r0*h4 : (r0+n)*h4]
		for r := 0; r < n; r++ {
			g, p := gt[r*h4:(r+1)*h4], pre[(r0+r)*h4:(r0+r+1)*h4]
			for j := range g {
				g[j] = p[j] + o.bias[j]
			}
		}
		kernels.Sgemm(false, false, n, h4, h, 1, hp, h, o.whhT, h4, 1, gt, h4, false)
		copy(o.hprev[r0*h:(r0+n)*h], hp)
		ct, tc, ht := o.cs[r0*h:(r0+n)*h], o.tcs[r0*h:(r0+n)*h], hs[r0*h:(r0+n)*h]
		for r := 0; r < n; r++ {
			g := gt[r*h4 : (r+1)*h4]
			sigmoidVec(g[:2*h], g[:2*h]) // i, f
			tanhVec(g[2*h:3*h], g[2*h:3*h])
			sigmoidVec(g[3*h:], g[3*h:]) // o
			ig, fg, gg := g[:h], g[h:2*h], g[2*h:3*h]
			c, cpr := ct[r*h:(r+1)*h], cp[r*h:(r+1)*h]
			for j := range c {
				c[j] = fg[j]*cpr[j] + ig[j]*gg[j]
			}
		}
		tanhVec(tc, ct)
		for r := 0; r < n; r++ {
			og, tr, hr := gt[r*h4+3*h:(r+1)*h4], tc[r*h:(r+1)*h], ht[r*h:(r+1)*h]
			for j := range hr {
				hr[j] = og[j] * tr[j]
			}
		}
		hp, cp = ht, ct
	}
}

func (o *lstmOp) DiffWRT(n int) []bool { return []bool{true, true, true, true}[:n] }

func (o *lstmOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	dpre, err := G.ApplyOp(&lstmBwdOp{opBase: opBase{name: "lstm.bptt", arity: 2}, fwd: o}, in[1], grad)
	if err != nil {
		return nil, err
	}
	dw, err := G.ApplyOp(&lstmDWOp{opBase: opBase{name: "lstm.dwhh", arity: 1}, fwd: o}, dpre)
	if err != nil {
		return nil, err
	}
	// The two biases have the same gradient; each gets a node of its own, since the hooks of
	// their parameters may overwrite it.
	dbih, err := columnSum(dpre)
	if err != nil {
		return nil, err
	}
	dbhh, err := columnSum(dpre)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dpre, dw, dbih, dbhh}, nil
}

// lstmBwdOp is backpropagation through time: from the gradient of every h_t it computes the
// gradient of every step's gate pre-activations (which is also the gradient of pre).
type lstmBwdOp struct {
	opBase
	fwd    *lstmOp
	dc, dn []float32
	out    buffer
}

func (o *lstmBwdOp) Type() hm.Type { return fnType(2, 2, 2) }

func (o *lstmBwdOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{o.fwd.t * o.fwd.b, 4 * o.fwd.h}, nil
}

func (o *lstmBwdOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	f := o.fwd
	f.st.bwdOps++
	whh, dhs := in[0], in[1]
	h, b, h4 := f.h, f.b, 4*f.h
	t, dpre := o.out.get(tensor.Shape{f.t * b, h4}, false)
	if o.dc == nil {
		o.dc, o.dn = make([]float32, b*h), make([]float32, b*h)
	}
	parallel.For(b, 1, func(_, lo, hi int) { o.backwardRows(whh, dhs, dpre, lo, hi) })
	return t, nil
}

// backwardRows runs BPTT for streams [lo, hi), which are independent of the others.
func (o *lstmBwdOp) backwardRows(whh, dhs, dpre []float32, lo, hi int) {
	f := o.fwd
	h, b, h4, n := f.h, f.b, 4*f.h, hi-lo
	// dn: gradient into h_t from step t+1; dc: into c_t from step t+1.
	dn, dc := o.dn[lo*h:hi*h], o.dc[lo*h:hi*h]
	clear(dn)
	clear(dc)
	for s := f.t - 1; s >= 0; s-- {
		r0 := s*b + lo
		cp := f.cprev[lo*h : hi*h]
		if s > 0 {
			cp = f.cs[(r0-b)*h : (r0-b+n)*h]
		}
		gt, dg := f.gates[r0*h4:(r0+n)*h4], dpre[r0*h4:(r0+n)*h4]
		tc, dht := f.tcs[r0*h:(r0+n)*h], dhs[r0*h:(r0+n)*h]
		for r := 0; r < n; r++ {
			lstmCellBackward(gt[r*h4:(r+1)*h4], dg[r*h4:(r+1)*h4], tc[r*h:(r+1)*h], cp[r*h:(r+1)*h],
				dht[r*h:(r+1)*h], dn[r*h:(r+1)*h], dc[r*h:(r+1)*h])
		}
		kernels.Sgemm(false, false, n, h, h4, 1, dg, h4, whh, h, 0, dn, h, false)
	}
}

// lstmCellBackward computes one row's gate gradients d (i, f, g, o) from the activated gates g,
// tanh(c_t) tc, c_{t-1} cp, the gradient dh of h_t from above and dn from step t+1, and replaces
// dc, the gradient of c_t from step t+1, by that of c_{t-1}.
func lstmCellBackward(g, d, tc, cp, dh, dn, dc []float32) {
	h := len(tc)
	if vecAVX512 && h > 0 {
		g, d, cp, dh, dn, dc = g[:4*h], d[:4*h], cp[:h], dh[:h], dn[:h], dc[:h]
		lstmCellBackwardAVX512(&g[0], &d[0], &tc[0], &cp[0], &dh[0], &dn[0], &dc[0], h)
		return
	}
	lstmCellBackwardGo(g, d, tc, cp, dh, dn, dc)
}

// lstmCellBackwardGo is lstmCellBackward without the vector kernel.
func lstmCellBackwardGo(g, d, tc, cp, dh, dn, dc []float32) {
	h := len(tc)
	ig, fg, gg, og := g[:h], g[h:2*h], g[2*h:3*h], g[3*h:4*h]
	di, df, dgg, do := d[:h], d[h:2*h], d[2*h:3*h], d[3*h:4*h]
	cp, dh, dn, dc = cp[:h], dh[:h], dn[:h], dc[:h]
	for j, t := range tc {
		i, f, gv, o := ig[j], fg[j], gg[j], og[j]
		dhj := dh[j] + dn[j]
		dcell := dc[j] + dhj*o*(1-t*t)
		di[j] = dcell * gv * i * (1 - i)
		df[j] = dcell * cp[j] * f * (1 - f)
		dgg[j] = dcell * i * (1 - gv*gv)
		do[j] = dhj * t * o * (1 - o)
		dc[j] = dcell * f
	}
}

func (o *lstmBwdOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *lstmBwdOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}

// lstmDWOp is the gradient of W_hh: Σ_t dgates_tᵀ·h_{t-1}, one GEMM over all steps.
type lstmDWOp struct {
	opBase
	fwd *lstmOp
	out buffer
}

func (o *lstmDWOp) Type() hm.Type { return fnType(2, 2) }

func (o *lstmDWOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{4 * o.fwd.h, o.fwd.h}, nil
}

func (o *lstmDWOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	f := o.fwd
	h, h4, rows := f.h, 4*f.h, f.t*f.b
	t, dw := o.out.get(tensor.Shape{h4, h}, false)
	kernels.Sgemm(true, false, h4, h, rows, 1, in[0], h4, f.hprev, h, 0, dw, h, true)
	return t, nil
}

func (o *lstmDWOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *lstmDWOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}
