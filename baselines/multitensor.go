package baselines

import (
	"fmt"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/pipeline"
)

// NewMultiTensor returns multi-tensor sparsification ("sparsification behind fusion", as in
// OMGS-SGD and Cupcake): gradients, with error feedback, are fused densely into buffers, and
// once a buffer is complete one selection over the whole buffer picks
// k = max(1, floor(density * buffer size)) elements, which are allgathered. It selects once
// per buffer instead of once per tensor, but a tensor whose elements all fall below the
// buffer-wide threshold sends nothing that step: it goes missing, and the pipeline counts
// such tensors.
func NewMultiTensor(comm dist.Communicator, tensors []pipeline.Tensor, thresholdBytes int, cfg pipeline.SparseConfig) (pipeline.Pipeline, error) {
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("multi-tensor: %w", err)
	}
	p := &multiTensor{sparseStage: sparseStage{comm: comm, tensors: tensors, cfg: cfg}}
	return pipeline.NewFusion(comm, tensors, thresholdBytes, p, true)
}

type multiTensor struct {
	sparseStage
	buckets []pipeline.Bucket
	fused   [][]float32 // by bucket: the memories of its tensors, back to back
	idx     []int32
}

func (p *multiTensor) Plan(f *pipeline.Fusion, buckets []pipeline.Bucket) ([]int, bool, error) {
	if err := p.plan(f, buckets); err != nil {
		return nil, false, err
	}
	p.buckets = buckets
	parts := make([]int, len(buckets))
	for b, bucket := range buckets {
		fused := make([]float32, bucket.Numel)
		for i, id := range bucket.Tensors {
			if err := p.mem.Bind(id, fused[bucket.Offsets[i]:bucket.Offsets[i]+len(p.tensors[id].Grad)]); err != nil {
				return nil, false, err
			}
		}
		p.fused = append(p.fused, fused)
		parts[b] = 1
	}
	return parts, false, nil
}

func (p *multiTensor) Process(id int, s pipeline.Slot, grad []float32) error {
	if _, err := p.mem.Accumulate(id, grad); err != nil {
		return err
	}
	if !p.f.Arrive(s.Bucket) {
		return nil
	}
	if err := p.selectBucket(s.Bucket); err != nil {
		return err
	}
	p.f.Done(s.Bucket)
	return nil
}

// selectBucket picks the buffer-wide top k and splits the picks by tensor.
func (p *multiTensor) selectBucket(b int) error {
	tm := p.f.Timing(p.cfg.Selector)
	start := tm.Start()
	bucket, fused := p.buckets[b], p.fused[b]
	var err error
	if p.idx, err = p.sel.Select(fused, pipeline.KFor(len(fused), p.cfg.DensityAt(p.f.Step())), p.idx); err != nil {
		return fmt.Errorf("selecting from fusion buffer %d: %w", b, err)
	}
	// Indices come in ascending order and tensors sit at ascending offsets, so one pass
	// splits them.
	rest, missing := p.idx, 0
	for i, id := range bucket.Tensors {
		lo, n := bucket.Offsets[i], len(p.tensors[id].Grad)
		j := 0
		for j < len(rest) && int(rest[j]) < lo+n {
			j++
		}
		part := &p.bufs[b].Parts[i]
		part.Indices, part.Values = part.Indices[:0], part.Values[:0]
		for _, x := range rest[:j] {
			part.Indices = append(part.Indices, x-int32(lo))
			part.Values = append(part.Values, fused[x])
		}
		rest = rest[j:]
		if err := p.mem.Sent(id, part.Indices); err != nil {
			return err
		}
		missing += pipeline.Missing(n, j)
	}
	p.f.Meter().Selected(tm.Took(start, len(fused)), len(p.idx), missing)
	return nil
}
