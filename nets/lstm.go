package nets

import (
	"fmt"
	"math"

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
	it := tensor.New(tensor.WithBacking(p.idx), tensor.WithShape(rows))
	idx := G.NewTensor(b.g, tensor.Int, 1, G.WithShape(rows), G.WithName("tokens"), G.WithValue(it))

	enc := b.param("encoder.weight", []int{s.Vocab, s.Embed}, uniform(0.1))
	if b.err != nil {
		return nil
	}
	// ByIndices along axis 0 (rows of the embedding); along the innermost axis its backward is
	// broken.
	x, err := G.ByIndices(enc, idx, 0)
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
		pre, err := linear(x, wih, bih, true)
		if !b.check(name, err) {
			return nil
		}
		hs, op, err := lstmLayer(pre, whh, bhh, s.SeqLen, s.BatchSize, &n.st)
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
	logits, err := linear(x, w, bias, true)
	if !b.check("decoder", err) {
		return nil
	}
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
