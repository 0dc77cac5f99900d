// Package baselines holds the gradient pipelines SSFusion is compared with: dense
// allreduce with tensor fusion (Horovod's wait-free backpropagation), per-tensor top-k
// sparsification and multi-tensor top-k sparsification.
package baselines

import (
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/pipeline"
)

// NewDense returns Horovod's tensor fusion over comm: gradients are packed, in backprop
// order, into buffers of up to thresholdBytes, and each buffer is allreduced (averaged) as
// soon as its last gradient arrives, while backward goes on. Buffers are issued in plan
// order, so every rank issues the same collectives in the same order.
func NewDense(comm dist.Communicator, tensors []pipeline.Tensor, thresholdBytes int) (pipeline.Pipeline, error) {
	d := &dense{comm: comm, tensors: tensors}
	return pipeline.NewFusion(comm, tensors, thresholdBytes, d, false)
}

type dense struct {
	comm    dist.Communicator
	tensors []pipeline.Tensor
	f       *pipeline.Fusion
	bufs    []*pipeline.DenseBuffer
}

func (d *dense) Plan(f *pipeline.Fusion, buckets []pipeline.Bucket) ([]int, bool, error) {
	d.f = f
	parts := make([]int, len(buckets))
	for b, bucket := range buckets {
		d.bufs = append(d.bufs, pipeline.NewDenseBuffer(d.tensors, bucket.Tensors))
		parts[b] = len(bucket.Tensors)
	}
	return parts, false, nil
}

func (d *dense) Process(_ int, s pipeline.Slot, grad []float32) error {
	d.bufs[s.Bucket].Put(s.Index, grad)
	d.f.Done(s.Bucket)
	return nil
}

func (d *dense) Issue(b int) pipeline.Completion { return d.bufs[b].AllReduce(d.comm) }

func (d *dense) Finish() error {
	for _, buf := range d.bufs {
		buf.Unpack(d.tensors)
		d.f.Meter().Dense(buf.Numel())
	}
	return nil
}

func (d *dense) Close() error { return nil }
