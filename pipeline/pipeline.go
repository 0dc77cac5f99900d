// Package pipeline is the contract between the trainer and the gradient pipelines: the
// Pipeline interface through which the trainer hands over each gradient as backprop produces
// it, the per-step metrics a pipeline reports, the state a checkpoint keeps (State,
// Stateful), the push bookkeeping every pipeline checks its calls with (Pushes), and the
// pass-through pipeline of a single process (Local).
//
// The pipelines live elsewhere: the fusion engine that most of them are built on (package
// fusion), the compression parts they share (package compress), the baselines (package
// baselines) and SSFusion (package ssfusion). They join the registry of package pipelines,
// through which the trainer, the simulator and the commands build them by name, so adding
// a pipeline touches no trainer code.
package pipeline

import (
	"time"

	"github.com/ssfusion/ssfusion/dist"
)

// Factory builds one rank's pipeline for tensors on comm.
type Factory func(comm dist.Communicator, tensors []Tensor) (Pipeline, error)

// Tensor describes one gradient tensor a pipeline synchronises: its index in the model's
// parameter order, its name, the number of dimensions of its parameter, and the live
// gradient buffer that Wait overwrites.
type Tensor struct {
	ID   int
	Name string
	// Dims is the number of dimensions of the parameter (4 for a convolution kernel, 2 for
	// a fully connected weight or an embedding, 1 for a bias or a norm's scale); 0 when
	// unknown. A rule that selects tensors by their shape reads it (SSFusion's rank rule).
	Dims int
	// Shape is the parameter's shape, outermost dimension first (PyTorch's layouts: a
	// convolution kernel is [out, in, k, k]); nil when unknown, as in a simulation from a
	// profile. A pipeline that compresses tensors as matrices reads it (PowerSGD).
	Shape []int
	Grad  []float32
}

// Pipeline synchronises gradients across workers, one step at a time.
//
// During backward the trainer calls Push for every tensor as soon as its gradient is ready, in
// backprop order; Push may start fusing, selecting and communicating at once. Wait blocks until
// every tensor's Grad holds the aggregated (averaged) gradient of the step. Every rank must
// issue its collectives in the same order.
type Pipeline interface {
	// Push hands over the gradient of tensor id for this step. grad is valid only during the
	// call; the pipeline copies what it needs.
	Push(id int, grad []float32) error
	// Wait finishes the step: afterwards every Tensor.Grad holds the aggregated gradient.
	Wait() error
	// Metrics reports the step that the last Wait finished.
	Metrics() StepMetrics
	// Close releases the pipeline's resources.
	Close() error
}

// StepMetrics is what a pipeline measured during one step. A figure the pipeline cannot
// measure is left at its zero value and flagged absent by the Has fields.
type StepMetrics struct {
	// Sparsify sums the time spent selecting elements (top-k and the like), on whichever
	// goroutines selection ran.
	Sparsify time.Duration
	// Comm is the time during which at least one of the step's collectives was in flight:
	// the union of their intervals, so collectives in flight together count once and Comm
	// never exceeds the step.
	Comm time.Duration
	Wait time.Duration // time Wait blocked after backward finished

	BytesSent  int64 // bytes this rank sent in the step
	DenseBytes int64 // bytes a dense allreduce of all gradients would have sent

	HasDensity      bool
	DensityAchieved float64 // elements sent / elements in all tensors
	TensorsMissing  int     // tensors with no element selected in this step

	// Extra holds figures particular to one pipeline, by name (ExDyna's
	// PartitionImbalance); nil when there are none. The trainer writes those it knows
	// into metrics.csv and summary.json.
	Extra map[string]float64
}

// PartitionImbalance names, in StepMetrics.Extra, the load imbalance between the
// partitions of a pipeline that partitions the gradient among the workers (ExDyna): the
// largest partition's selected count over the mean.
const PartitionImbalance = "partition_imbalance"

// IndexBytes and AuthorsIndexBytes name, in StepMetrics.Extra, the bytes of the index
// message a rank allgathers in a sparse step (ExDyna), in this project's encoding and in
// the encoding of the pipeline's authors' code, so that reports can compare the two.
const (
	IndexBytes        = "index_bytes"
	AuthorsIndexBytes = "index_bytes_authors"
)

// Local is the pipeline of a single process: the gradient each tensor received in backward is
// already the aggregate, so it only checks that every tensor was pushed once.
type Local struct {
	pushes  *Pushes
	metrics StepMetrics
}

// NewLocal returns the pass-through pipeline for tensors.
func NewLocal(tensors []Tensor) *Local {
	return &Local{pushes: NewPushes(tensors)}
}

// Push records that tensor id's gradient is ready.
func (l *Local) Push(id int, grad []float32) error { return l.pushes.Push(id, grad) }

// Wait checks that the step pushed every tensor and resets for the next step.
func (l *Local) Wait() error {
	start := time.Now()
	defer func() {
		l.pushes.Reset()
		l.metrics = StepMetrics{Wait: time.Since(start)}
	}()
	return l.pushes.Complete()
}

// Metrics reports the last step: a local pipeline sends nothing.
func (l *Local) Metrics() StepMetrics { return l.metrics }

// Close does nothing.
func (l *Local) Close() error { return nil }
