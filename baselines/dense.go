// Package baselines holds the gradient pipelines SSFusion is compared with: dense
// allreduce with tensor fusion (Horovod's wait-free backpropagation), per-tensor and
// multi-tensor top-k sparsification, OMGS-SGD's merged-gradient sparsification, Cupcake's
// compression scheduler, SAFusion, ExDyna and PowerSGD's low-rank compression.
package baselines

import (
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/fusion"
	"github.com/ssfusion/ssfusion/pipeline"
)

// NewDense returns Horovod's tensor fusion over comm: gradients are packed, in backprop
// order, into buffers of up to thresholdBytes, and each buffer is allreduced (averaged) as
// soon as its last gradient arrives, while backward goes on. Buffers are issued in plan
// order, so every rank issues the same collectives in the same order.
func NewDense(comm dist.Communicator, tensors []pipeline.Tensor, thresholdBytes int) (pipeline.Pipeline, error) {
	return fusion.New(comm, tensors, thresholdBytes, &dense{comm: comm, tensors: tensors}, false)
}

type dense struct {
	comm    dist.Communicator
	tensors []pipeline.Tensor
	e       fusion.Engine
	bufs    []*fusion.DenseBuffer
}

func (d *dense) Plan(e fusion.Engine, buckets []fusion.Bucket) ([]int, bool, error) {
	d.e = e
	parts := make([]int, len(buckets))
	for b, bucket := range buckets {
		d.bufs = append(d.bufs, fusion.NewDenseBuffer(d.tensors, bucket.Tensors))
		parts[b] = len(bucket.Tensors)
	}
	return parts, false, nil
}

func (d *dense) Process(_ int, s fusion.Slot, grad []float32) error {
	d.bufs[s.Bucket].Put(s.Index, grad)
	d.e.Done(s.Bucket)
	return nil
}

func (d *dense) Issue(b int) fusion.Completion { return d.bufs[b].AllReduce(d.comm) }

func (d *dense) Finish() error {
	for _, buf := range d.bufs {
		buf.Unpack(d.tensors)
	}
	return nil
}

func (d *dense) Close() error { return nil }
