package nets

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	"github.com/ssfusion/ssfusion/internal/parallel"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// buildLM adds the word-level LSTM language model (PyTorch's word_language_model RNNModel):
// embedding → dropout → Layers LSTM layers, each followed by dropout → linear decoder to the
// vocabulary. Rows are time-major (row t·B+b is stream b at step t), so that each LSTM step reads
// a contiguous block. Dropout exists only in the training graph.
func (n *net) buildLM(b *builder, p *phase) *G.Node {
	s := &n.spec
	rows := s.BatchSize * s.SeqLen
	p.idx = make([]int, rows)
	p.tgt = &target{labels: make([]int32, rows), weight: make([]float32, rows)}
	enc := b.param("encoder.weight", []int{s.Vocab, s.Embed}, uniform(0.1))
	if b.err != nil {
		return nil
	}
	// An op of our own rather than G.ByIndices, whose backward allocates a fresh (Vocab, Embed)
	// gradient every step that is mostly untouched memory.
	x, err := G.ApplyOp(&embedOp{opBase: opBase{name: "encoder", arity: 1}, idx: p.idx, shape: tensor.Shape{rows, s.Embed}}, enc)
	if !b.check("encoder", err) {
		return nil
	}
	x = n.dropout(b, p, x)
	h, bound := s.HSize, 1/math.Sqrt(float64(s.HSize))
	for l := 0; l < s.Layers && b.err == nil; l++ {
		name := fmt.Sprintf("rnn.%d", l)
		in := x.Shape()[1]
		wih := b.param(name+".w_ih", []int{4 * h, in}, uniform(bound))
		whh := b.param(name+".w_hh", []int{4 * h, h}, uniform(bound))
		bih := b.param(name+".b_ih", []int{4 * h}, uniform(bound))
		bhh := b.param(name+".b_hh", []int{4 * h}, uniform(bound))
		if b.err != nil {
			return nil
		}
		// The LSTM op adds both biases: their gradient is the same column sum, which it
		// computes across cores.
		pre, err := linear(x, wih, nil, true)
		if !b.check(name, err) {
			return nil
		}
		// The input projection here, the recurrent one of every step in the op.
		b.count(2 * float64(x.Shape()[0]) * float64(x.Shape()[1]*4*h))
		b.count(2 * float64(s.SeqLen*s.BatchSize) * float64(h*4*h))
		hs, op, err := lstmLayer(pre, whh, bih, bhh, s.SeqLen, s.BatchSize, &n.st)
		if !b.check(name, err) {
			return nil
		}
		p.lstms = append(p.lstms, op)
		x = n.dropout(b, p, hs)
	}
	if b.err != nil {
		return nil
	}
	w := b.param("decoder.weight", []int{s.Vocab, h}, uniform(0.1))
	bias := b.param("decoder.bias", []int{s.Vocab}, constant(0))
	if b.err != nil {
		return nil
	}
	logits, err := decoderLayer(x, w, bias)
	if !b.check("decoder", err) {
		return nil
	}
	b.count(2 * float64(x.Shape()[0]) * float64(h*s.Vocab))
	return logits
}

// dropout adds a dropout mask in the training graph when the spec asks for dropout.
func (n *net) dropout(b *builder, p *phase, x *G.Node) *G.Node {
	if b.err != nil || !b.train || n.spec.Dropout == 0 {
		return x
	}
	y, m, err := applyMask(x)
	if !b.check("dropout", err) {
		return nil
	}
	p.masks = append(p.masks, m)
	return y
}

// feedTokens validates a language-model batch and copies it, transposed to time-major order.
// Padding streams read token 0 and have zero weight.
func (n *net) feedTokens(p *phase, b *Batch) error {
	s := &n.spec
	bs, t := s.BatchSize, s.SeqLen
	if len(b.Tokens) != b.N*t && len(b.Tokens) != bs*t {
		return fmt.Errorf("batch has %d tokens, want N·%d = %d or BatchSize·%d = %d", len(b.Tokens), t, b.N*t, t, bs*t)
	}
	if len(b.Labels) != b.N*t && len(b.Labels) != bs*t {
		return fmt.Errorf("batch has %d labels, want N·%d = %d or BatchSize·%d = %d", len(b.Labels), t, b.N*t, t, bs*t)
	}
	for i := 0; i < b.N*t; i++ {
		if tok := b.Tokens[i]; tok < 0 || int(tok) >= s.Vocab {
			return fmt.Errorf("token %d at stream %d, step %d is out of range [0, %d)", tok, i/t, i%t, s.Vocab)
		}
		if l := b.Labels[i]; l < 0 || int(l) >= s.Vocab {
			return fmt.Errorf("label %d at stream %d, step %d is out of range [0, %d)", l, i/t, i%t, s.Vocab)
		}
	}
	w := 1 / float32(b.N*t)
	for r := 0; r < bs; r++ {
		for k := 0; k < t; k++ {
			row := k*bs + r
			if r < b.N {
				p.idx[row] = int(b.Tokens[r*t+k])
				p.tgt.labels[row], p.tgt.weight[row] = b.Labels[r*t+k], w
			} else {
				p.idx[row] = 0
				p.tgt.labels[row], p.tgt.weight[row] = 0, 0
			}
		}
	}
	return nil
}

// ResetState zeroes the hidden state carried between TrainStep calls.
func (r *recurrentNet) ResetState() {
	for _, l := range r.train.lstms {
		l.reset()
	}
}

// ResetEvalState zeroes the hidden state carried between Evaluate calls.
func (r *recurrentNet) ResetEvalState() {
	for _, l := range r.eval.lstms {
		l.reset()
	}
}

// embedOp gathers rows idx[r] of the embedding table (V, E) into an (R, E) output. The model
// refills idx before each run.
type embedOp struct {
	opBase
	idx   []int
	shape tensor.Shape // (R, E)
	out   buffer
}

func (o *embedOp) Type() hm.Type { return fnType(2, 2) }

func (o *embedOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return o.shape.Clone(), nil }

func (o *embedOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	w, e := in[0], o.shape[1]
	if len(o.idx) != o.shape[0] || len(w)%e != 0 {
		return nil, fmt.Errorf("%s: %d indices, table of %d values, rows of %d", o.name, len(o.idx), len(w), e)
	}
	vocab := len(w) / e
	t, out := o.out.get(o.shape, false)
	for r, i := range o.idx {
		if i < 0 || i >= vocab {
			return nil, fmt.Errorf("%s: index %d out of range [0, %d)", o.name, i, vocab)
		}
		copy(out[r*e:(r+1)*e], w[i*e:(i+1)*e])
	}
	return t, nil
}

func (o *embedOp) DiffWRT(n int) []bool { return []bool{true}[:n] }

func (o *embedOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	d := &embedGradOp{opBase: opBase{name: "encoder.dw", arity: 1}, fwd: o, shape: in[0].Shape().Clone()}
	n, err := G.ApplyOp(d, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{n}, nil
}

// embedGradOp scatter-adds the output gradient (R, E) into a dense (V, E) gradient of the table,
// kept across steps (and cleared each time, since the hook may have written anywhere in it).
type embedGradOp struct {
	opBase
	fwd   *embedOp
	shape tensor.Shape // (V, E)
	dw    buffer
}

func (o *embedGradOp) Type() hm.Type { return fnType(2, 2) }

func (o *embedGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return o.shape.Clone(), nil }

func (o *embedGradOp) Do(vs ...G.Value) (v G.Value, err error) {
	defer guard(o.name, &err)
	in, err := inputs(&o.opBase, vs)
	if err != nil {
		return nil, err
	}
	g, e := in[0], o.fwd.shape[1]
	if len(g) != len(o.fwd.idx)*e {
		return nil, fmt.Errorf("%s: gradient of %d values for %d rows of %d", o.name, len(g), len(o.fwd.idx), e)
	}
	t, dw := o.dw.get(o.shape, false)
	parallel.For(len(dw), 1<<16, func(_, lo, hi int) { clear(dw[lo:hi]) })
	for r, i := range o.fwd.idx {
		accumulate(dw[i*e:(i+1)*e], g[r*e:(r+1)*e])
	}
	return t, nil
}

func (o *embedGradOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (o *embedGradOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s: no second derivative", o.name)
}
