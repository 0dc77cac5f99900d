// Package baselines holds the gradient pipelines SSFusion is compared with. Dense is
// Horovod's tensor fusion with allreduce (wait-free backpropagation): the reference every
// sparsifying pipeline must beat.
package baselines

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/pipeline"
)

// Dense fuses gradients, in backprop order, into buffers of up to a byte threshold and
// allreduces (averages) each buffer as soon as its last gradient arrives, while backward
// goes on.
//
// The fusion plan needs the backprop order, which the model only reveals by running: the
// first step records it, rank 0's order is broadcast so that every rank builds the same plan,
// and that step's buffers are reduced after backward. From the second step on, buffers are
// reduced during backward, always issued in plan order so every rank issues the same
// collectives in the same order.
type Dense struct {
	comm      dist.Communicator
	tensors   []pipeline.Tensor
	threshold int

	pushed  []bool
	order   []int // backprop order seen in the first step
	buckets []pipeline.Bucket
	slot    []slot // where each tensor lives in the plan
	fused   [][]float32
	pending []int // gradients each bucket still waits for
	handles []dist.Handle
	issued  int // buckets whose allreduce has started

	stepStart time.Time
	before    dist.Stats
	metrics   pipeline.StepMetrics
}

type slot struct{ bucket, offset int }

// NewDense returns the dense pipeline over comm with buffers of up to thresholdBytes.
func NewDense(comm dist.Communicator, tensors []pipeline.Tensor, thresholdBytes int) (*Dense, error) {
	if thresholdBytes <= 0 {
		return nil, fmt.Errorf("dense: fusion threshold must be positive, got %d bytes", thresholdBytes)
	}
	return &Dense{comm: comm, tensors: tensors, threshold: thresholdBytes, pushed: make([]bool, len(tensors))}, nil
}

// Push takes tensor id's gradient; once a buffer is complete its allreduce starts.
func (d *Dense) Push(id int, grad []float32) error {
	if err := pipeline.CheckPush(d.tensors, d.pushed, id, grad); err != nil {
		return err
	}
	if d.stepStart.IsZero() {
		d.stepStart, d.before = time.Now(), d.comm.Stats()
	}
	d.pushed[id] = true
	if d.buckets == nil {
		d.order = append(d.order, id)
		return nil
	}
	s := d.slot[id]
	copy(d.fused[s.bucket][s.offset:], grad)
	d.pending[s.bucket]--
	d.issueReady()
	return nil
}

// issueReady starts the allreduce of every complete buffer whose predecessors have started.
func (d *Dense) issueReady() {
	for d.issued < len(d.buckets) && d.pending[d.issued] == 0 {
		d.handles[d.issued] = d.comm.AllReduceAsync(d.fused[d.issued], dist.Average)
		d.issued++
	}
}

// Wait finishes the step's allreduces and writes the averaged gradients back.
func (d *Dense) Wait() error {
	waitStart := time.Now()
	defer d.endStep()
	if err := pipeline.CheckAllPushed(d.tensors, d.pushed); err != nil {
		return err
	}
	if d.buckets == nil {
		if err := d.plan(); err != nil {
			return err
		}
		for b, bucket := range d.buckets {
			for i, id := range bucket.Tensors {
				copy(d.fused[b][bucket.Offsets[i]:], d.tensors[id].Grad)
			}
			d.pending[b] = 0
		}
		d.issueReady()
	}
	var first error
	for b, h := range d.handles[:d.issued] {
		if err := h.Wait(); err != nil && first == nil {
			first = fmt.Errorf("allreduce of fusion buffer %d: %w", b, err)
		}
	}
	if first != nil {
		return first
	}
	for b, bucket := range d.buckets {
		for i, id := range bucket.Tensors {
			g := d.tensors[id].Grad
			copy(g, d.fused[b][bucket.Offsets[i]:bucket.Offsets[i]+len(g)])
		}
	}
	d.recordMetrics(time.Since(waitStart))
	return nil
}

// plan agrees on rank 0's backprop order and builds the fusion buffers from it.
func (d *Dense) plan() error {
	order := make([]byte, 4*len(d.order))
	for i, id := range d.order {
		binary.LittleEndian.PutUint32(order[4*i:], uint32(id))
	}
	if err := d.comm.Broadcast(order, 0); err != nil {
		return fmt.Errorf("agreeing on the backprop order: %w", err)
	}
	for i := range d.order {
		d.order[i] = int(binary.LittleEndian.Uint32(order[4*i:]))
	}
	buckets, err := pipeline.PlanBuckets(d.order, func(id int) int { return len(d.tensors[id].Grad) }, d.threshold)
	if err != nil {
		return err
	}
	d.buckets = buckets
	d.slot = make([]slot, len(d.tensors))
	d.fused = make([][]float32, len(buckets))
	d.pending = make([]int, len(buckets))
	d.handles = make([]dist.Handle, len(buckets))
	for b, bucket := range buckets {
		d.fused[b] = make([]float32, bucket.Numel)
		for i, id := range bucket.Tensors {
			d.slot[id] = slot{b, bucket.Offsets[i]}
		}
	}
	return nil
}

func (d *Dense) recordMetrics(wait time.Duration) {
	delta := d.comm.Stats().Sub(d.before)
	d.metrics = pipeline.StepMetrics{
		Comm:       delta.CommTime(),
		Wait:       wait,
		BytesSent:  delta.BytesSent,
		DenseBytes: pipeline.RingAllReduceBytes(pipeline.TotalNumel(d.tensors), d.comm.Size()),
	}
}

// endStep readies the pipeline for the next step, whatever happened in this one.
func (d *Dense) endStep() {
	clear(d.pushed)
	d.issued = 0
	d.stepStart = time.Time{}
	for b := range d.buckets {
		d.pending[b] = len(d.buckets[b].Tensors)
		d.handles[b] = nil
	}
}

// Metrics reports the last step.
func (d *Dense) Metrics() pipeline.StepMetrics { return d.metrics }

// Close does nothing: the communicator belongs to the caller.
func (d *Dense) Close() error { return nil }
