package baselines

import (
	"fmt"
	"slices"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/fusion"
	"github.com/ssfusion/ssfusion/pipeline"
)

// NewMultiTensor returns multi-tensor sparsification ("sparsification behind fusion", as in
// OMGS-SGD and Cupcake): gradients, with error feedback, are fused densely into buffers, and
// once a buffer is complete one selection over the whole buffer picks
// k = max(1, floor(density * buffer size)) elements, which are allgathered. It selects once
// per buffer instead of once per tensor, but a tensor whose elements all fall below the
// buffer-wide threshold sends nothing that step: it goes missing, and the pipeline counts
// such tensors.
func NewMultiTensor(comm dist.Communicator, tensors []pipeline.Tensor, thresholdBytes int, cfg compress.Config) (pipeline.Pipeline, error) {
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("multi-tensor: %w", err)
	}
	p := &multiTensor{sparseStage: sparseStage{comm: comm, tensors: tensors, cfg: cfg}}
	return fusion.New(comm, tensors, thresholdBytes, p, true)
}

type multiTensor struct {
	sparseStage
	buckets []fusion.Bucket
	fused   [][]float32 // by bucket: the memories of its tensors, back to back
}

// Plan binds the memories of each bucket's tensors back to back into one buffer, which
// the bucket-wide selection reads in place. A later plan (OMGS-SGD re-plans) moves every
// residual into the new buffers.
func (p *multiTensor) Plan(e fusion.Engine, buckets []fusion.Bucket) ([]int, bool, error) {
	if err := p.plan(e, buckets); err != nil {
		return nil, false, err
	}
	p.buckets = buckets
	p.fused = p.fused[:0]
	parts := make([]int, len(buckets))
	mem := p.c.Memory()
	for b, bucket := range buckets {
		fused := make([]float32, bucket.Numel)
		for i, id := range bucket.Tensors {
			kept := slices.Clone(mem.Residual(id))
			into := fused[bucket.Offsets[i] : bucket.Offsets[i]+len(p.tensors[id].Grad)]
			if err := mem.Bind(id, into); err != nil {
				return nil, false, err
			}
			copy(into, kept)
		}
		p.fused = append(p.fused, fused)
		parts[b] = 1
	}
	return parts, false, nil
}

func (p *multiTensor) Process(id int, s fusion.Slot, grad []float32) error {
	if err := p.c.Accumulate(id, grad); err != nil {
		return err
	}
	if !s.Last {
		return nil
	}
	b := p.buckets[s.Bucket]
	if err := p.c.SelectFused(p.fused[s.Bucket], b.Tensors, b.Offsets, p.bufs[s.Bucket].Parts); err != nil {
		return fmt.Errorf("fusion buffer %d: %w", s.Bucket, err)
	}
	p.e.Done(s.Bucket)
	return nil
}
