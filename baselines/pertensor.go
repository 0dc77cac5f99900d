package baselines

import (
	"fmt"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/pipeline"
)

// NewPerTensor returns per-tensor sparsification: every tensor is sparsified on its own,
// with error feedback, as soon as its gradient arrives (on the goroutine running backward),
// sending k_i = max(1, floor(density*n_i)) elements, so no tensor ever goes missing. The
// sparse results of each fusion buffer are encoded into one message and allgathered.
func NewPerTensor(comm dist.Communicator, tensors []pipeline.Tensor, thresholdBytes int, cfg pipeline.SparseConfig) (pipeline.Pipeline, error) {
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("per-tensor: %w", err)
	}
	p := &perTensor{sparseStage: sparseStage{comm: comm, tensors: tensors, cfg: cfg}}
	return pipeline.NewFusion(comm, tensors, thresholdBytes, p, true)
}

type perTensor struct{ sparseStage }

func (p *perTensor) Plan(f *pipeline.Fusion, buckets []pipeline.Bucket) ([]int, bool, error) {
	if err := p.plan(f, buckets); err != nil {
		return nil, false, err
	}
	parts := make([]int, len(buckets))
	for b, bucket := range buckets {
		parts[b] = len(bucket.Tensors)
	}
	return parts, false, nil
}

func (p *perTensor) Process(id int, s pipeline.Slot, grad []float32) error {
	acc, err := p.mem.Accumulate(id, grad)
	if err != nil {
		return err
	}
	part := &p.bufs[s.Bucket].Parts[s.Index]
	d, err := pipeline.Sparsify(p.f.Timing(p.cfg.Selector), p.sel, p.mem, id, acc, pipeline.KFor(len(grad), p.cfg.DensityAt(p.f.Step())), part)
	if err != nil {
		return err
	}
	p.f.Meter().Selected(d, len(part.Indices), pipeline.Missing(len(grad), len(part.Indices)))
	p.f.Done(s.Bucket)
	return nil
}

// sparseStage is what the sparsifying baselines share: one sparse buffer per fusion buffer,
// allgathered and scatter-averaged, and the error-feedback memory.
type sparseStage struct {
	comm    dist.Communicator
	tensors []pipeline.Tensor
	cfg     pipeline.SparseConfig
	f       *pipeline.Fusion
	mem     *pipeline.Memory
	sel     pipeline.Selector // selection runs on the pushing goroutine only
	bufs    []*pipeline.SparseBuffer
}

func (p *sparseStage) plan(f *pipeline.Fusion, buckets []pipeline.Bucket) error {
	p.f = f
	sizes := make([]int, len(p.tensors))
	for i, t := range p.tensors {
		sizes[i] = len(t.Grad)
	}
	var err error
	if p.mem, err = pipeline.NewMemory(sizes, p.cfg.Momentum); err != nil {
		return err
	}
	if p.sel, err = pipeline.NewSelector(p.cfg.Selector, p.cfg.Seed+uint64(p.comm.Rank())); err != nil {
		return err
	}
	for _, bucket := range buckets {
		p.bufs = append(p.bufs, pipeline.NewSparseBuffer(p.tensors, bucket.Tensors))
	}
	return nil
}

// Memory returns the error-feedback memory, nil before the plan; checkpoints read it.
func (p *sparseStage) Memory() *pipeline.Memory { return p.mem }

func (p *sparseStage) Issue(b int) pipeline.Completion { return p.bufs[b].AllGather(p.comm) }

func (p *sparseStage) Finish() error {
	for b, buf := range p.bufs {
		if err := buf.Average(); err != nil {
			return fmt.Errorf("fusion buffer %d: %w", b, err)
		}
	}
	return nil
}

func (p *sparseStage) Close() error { return nil }
