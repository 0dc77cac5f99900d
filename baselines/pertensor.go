package baselines

import (
	"fmt"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/fusion"
	"github.com/ssfusion/ssfusion/pipeline"
)

// NewPerTensor returns per-tensor sparsification: every tensor is sparsified on its own,
// with error feedback, as soon as its gradient arrives (on the goroutine running backward),
// sending k_i = max(1, floor(density*n_i)) elements, so no tensor ever goes missing. The
// sparse results of each fusion buffer are encoded into one message and allgathered.
func NewPerTensor(comm dist.Communicator, tensors []pipeline.Tensor, thresholdBytes int, cfg compress.Config) (pipeline.Pipeline, error) {
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("per-tensor: %w", err)
	}
	p := &perTensor{sparseStage: sparseStage{comm: comm, tensors: tensors, cfg: cfg}}
	return fusion.New(comm, tensors, thresholdBytes, p, true)
}

type perTensor struct{ sparseStage }

func (p *perTensor) Plan(e fusion.Engine, buckets []fusion.Bucket) ([]int, bool, error) {
	if err := p.plan(e, buckets); err != nil {
		return nil, false, err
	}
	parts := make([]int, len(buckets))
	for b, bucket := range buckets {
		parts[b] = len(bucket.Tensors)
	}
	return parts, false, nil
}

func (p *perTensor) Process(id int, s fusion.Slot, grad []float32) error {
	if err := p.c.Compress(id, grad, &p.bufs[s.Bucket].Parts[s.Index]); err != nil {
		return err
	}
	p.e.Done(s.Bucket)
	return nil
}

// sparseStage is what the sparsifying baselines share: one sparse buffer per fusion buffer,
// allgathered and scatter-averaged, and a compressor whose selection runs on the pushing
// goroutine.
type sparseStage struct {
	comm    dist.Communicator
	tensors []pipeline.Tensor
	cfg     compress.Config
	e       fusion.Engine
	c       *compress.Compressor
	bufs    []*fusion.SparseBuffer
}

// plan builds the sparse buffers of a plan. The compressor, with the error-feedback memory,
// is created by the first plan and kept by later ones (a stage that re-plans).
func (p *sparseStage) plan(e fusion.Engine, buckets []fusion.Bucket) error {
	p.e = e
	if p.c == nil {
		sel, err := compress.NewSelector(p.cfg.Selector, p.cfg.Seed+uint64(p.comm.Rank()))
		if err != nil {
			return err
		}
		if p.c, err = fusion.NewCompressor(e, p.cfg, pipeline.Sizes(p.tensors), sel); err != nil {
			return err
		}
	}
	p.bufs = p.bufs[:0]
	for _, bucket := range buckets {
		p.bufs = append(p.bufs, fusion.NewSparseBuffer(p.tensors, bucket.Tensors))
	}
	return nil
}

// Memory returns the error-feedback memory, nil before the plan; checkpoints read it.
func (p *sparseStage) Memory() *compress.Memory { return p.c.Memory() }

func (p *sparseStage) Issue(b int) fusion.Completion { return p.bufs[b].AllGather(p.comm) }

func (p *sparseStage) Finish() error {
	for b, buf := range p.bufs {
		if err := buf.Average(); err != nil {
			return fmt.Errorf("fusion buffer %d: %w", b, err)
		}
	}
	return nil
}

func (p *sparseStage) Close() error { return nil }
