package nets

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// lstmOp runs one LSTM layer over a whole sequence, PyTorch's cell with gate order i, f, g, o:
//
//	gates_t = pre_t + b_hh + h_{t-1}·W_hhᵀ,  c_t = σ(f)·c_{t-1} + σ(i)·tanh(g),  h_t = σ(o)·tanh(c_t)
//
// where pre = x·W_ihᵀ + b_ih is computed for all steps at once outside the op. Input and output
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

	// Saved by the forward for the backward.
	gates []float32 // (T·B, 4H) activated gates
	cs    []float32 // (T·B, H) cell states
	hprev []float32 // (T·B, H) h_{t-1} for every step
	cprev []float32 // (B, H) c0 of the run
	out   buffer
}

func lstmLayer(pre, whh, bhh *G.Node, seq, batch int, st *stepState) (*G.Node, *lstmOp, error) {
	ws := whh.Shape()
	if ws.Dims() != 2 || ws[0] != 4*ws[1] || pre.Dims() != 2 || pre.Shape()[0] != seq*batch || pre.Shape()[1] != ws[0] ||
		bhh.Shape().TotalSize() != ws[0] {
		return nil, nil, fmt.Errorf("lstm: pre-activations %v, W_hh %v and b_hh %v do not match", pre.Shape(), ws, bhh.Shape())
	}
	h := ws[1]
	op := &lstmOp{
		opBase: opBase{name: "lstm", arity: 3}, st: st, t: seq, b: batch, h: h,
		h0: make([]float32, batch*h), c0: make([]float32, batch*h),
		hT: make([]float32, batch*h), cT: make([]float32, batch*h),
		gates: make([]float32, seq*batch*4*h), cs: make([]float32, seq*batch*h),
		hprev: make([]float32, seq*batch*h), cprev: make([]float32, batch*h),
	}
	n, err := G.ApplyOp(op, pre, whh, bhh)
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

func (o *lstmOp) Type() hm.Type { return fnType(2, 2, 2, 1) }

func (o *lstmOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{o.t * o.b, o.h}, nil
}

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

func tanh32(x float32) float32 { return float32(math.Tanh(float64(x))) }

func (o *lstmOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	pre, whh, bhh := in[0], in[1], in[2]
	h, b, h4 := o.h, o.b, 4*o.h
	t, hs := o.out.get(tensor.Shape{o.t * b, h}, false)
	copy(o.cprev, o.c0)
	hp, cp := o.h0, o.cprev
	for s := 0; s < o.t; s++ {
		gt := o.gates[s*b*h4 : (s+1)*b*h4]
		for r := 0; r < b; r++ {
			row := gt[r*h4 : (r+1)*h4]
			for j, p := range pre[(s*b+r)*h4 : (s*b+r+1)*h4] {
				row[j] = p + bhh[j]
			}
		}
		gemm(false, true, b, h4, h, 1, hp, h, whh, h, 1, gt, h4, true)
		copy(o.hprev[s*b*h:(s+1)*b*h], hp)
		ct := o.cs[s*b*h : (s+1)*b*h]
		ht := hs[s*b*h : (s+1)*b*h]
		for r := 0; r < b; r++ {
			g := gt[r*h4 : (r+1)*h4]
			for j := 0; j < h; j++ {
				ig, fg, gg, og := sigmoid(g[j]), sigmoid(g[h+j]), tanh32(g[2*h+j]), sigmoid(g[3*h+j])
				g[j], g[h+j], g[2*h+j], g[3*h+j] = ig, fg, gg, og
				c := fg*cp[r*h+j] + ig*gg
				ct[r*h+j] = c
				ht[r*h+j] = og * tanh32(c)
			}
		}
		hp, cp = ht, ct
	}
	copy(o.hT, hp)
	copy(o.cT, cp)
	return t, nil
}

func (o *lstmOp) DiffWRT(n int) []bool { return []bool{true, true, true}[:n] }

func (o *lstmOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	dpre, err := G.ApplyOp(&lstmBwdOp{opBase: opBase{name: "lstm.bptt", arity: 2}, fwd: o}, in[1], grad)
	if err != nil {
		return nil, err
	}
	dw, err := G.ApplyOp(&lstmDWOp{opBase: opBase{name: "lstm.dwhh", arity: 1}, fwd: o}, dpre)
	if err != nil {
		return nil, err
	}
	db, err := channelSum(dpre)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dpre, dw, db}, nil
}

// lstmBwdOp is backpropagation through time: from the gradient of every h_t it computes the
// gradient of every step's gate pre-activations (which is also the gradient of pre).
type lstmBwdOp struct {
	opBase
	fwd        *lstmOp
	dh, dc, dn []float32
	out        buffer
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
	if o.dh == nil {
		o.dh, o.dc, o.dn = make([]float32, b*h), make([]float32, b*h), make([]float32, b*h)
	}
	dn, dc := o.dn, o.dc // dn: gradient into h_{t} from step t+1; dc: into c_t from step t+1
	clear(dn)
	clear(dc)
	for s := f.t - 1; s >= 0; s-- {
		gt := f.gates[s*b*h4 : (s+1)*b*h4]
		dg := dpre[s*b*h4 : (s+1)*b*h4]
		ct := f.cs[s*b*h : (s+1)*b*h]
		cp := f.cprev
		if s > 0 {
			cp = f.cs[(s-1)*b*h : s*b*h]
		}
		dht := dhs[s*b*h : (s+1)*b*h]
		for r := 0; r < b; r++ {
			g := gt[r*h4 : (r+1)*h4]
			d := dg[r*h4 : (r+1)*h4]
			for j := 0; j < h; j++ {
				k := r*h + j
				ig, fg, gg, og := g[j], g[h+j], g[2*h+j], g[3*h+j]
				tc := tanh32(ct[k])
				dh := dht[k] + dn[k]
				dcell := dc[k] + dh*og*(1-tc*tc)
				d[j] = dcell * gg * ig * (1 - ig)
				d[h+j] = dcell * cp[k] * fg * (1 - fg)
				d[2*h+j] = dcell * ig * (1 - gg*gg)
				d[3*h+j] = dh * tc * og * (1 - og)
				dc[k] = dcell * fg
			}
		}
		gemm(false, false, b, h, h4, 1, dg, h4, whh, h, 0, dn, h, true)
	}
	return t, nil
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
	gemm(true, false, h4, h, rows, 1, in[0], h4, f.hprev, h, 0, dw, h, true)
	return t, nil
}

func (o *lstmDWOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *lstmDWOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}
