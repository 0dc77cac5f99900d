// Package pipeline holds what every gradient pipeline shares: the Pipeline interface through
// which the trainer hands over gradients as backprop produces them, the per-step metrics a
// pipeline reports, and the local pass-through pipeline used by a single process.
//
// The trainer knows only this package; concrete pipelines (dense allreduce, per-tensor and
// multi-tensor sparsification, SSFusion, ...) live in their own packages and are chosen by name
// at the top of the program, so adding one touches no trainer code.
package pipeline

import "time"

// Tensor describes one gradient tensor a pipeline synchronises: its index in the model's
// parameter order, its name and the live gradient buffer that Wait overwrites.
type Tensor struct {
	ID   int
	Name string
	Grad []float32
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
	// Comm sums, over the step's collectives, the time each was in flight; collectives that
	// overlap each count in full, so Comm can exceed the step's wall time.
	Comm time.Duration
	Wait time.Duration // time Wait blocked after backward finished

	BytesSent  int64 // bytes this rank sent in the step
	DenseBytes int64 // bytes a dense allreduce of all gradients would have sent

	HasDensity      bool
	DensityAchieved float64 // elements sent / elements in all tensors
	TensorsMissing  int     // tensors with no element selected in this step

	Imbalance float64 // ExDyna: largest partition's selected count over the mean; 0 when not applicable
}

// Local is the pipeline of a single process: the gradient each tensor received in backward is
// already the aggregate, so it only checks that every tensor was pushed once.
type Local struct {
	tensors []Tensor
	pushed  []bool
	metrics StepMetrics
}

// NewLocal returns the pass-through pipeline for tensors.
func NewLocal(tensors []Tensor) *Local {
	return &Local{tensors: tensors, pushed: make([]bool, len(tensors))}
}

// Push records that tensor id's gradient is ready.
func (l *Local) Push(id int, grad []float32) error {
	if err := CheckPush(l.tensors, l.pushed, id, grad); err != nil {
		return err
	}
	l.pushed[id] = true
	return nil
}

// Wait checks that the step pushed every tensor and resets for the next step.
func (l *Local) Wait() error {
	start := time.Now()
	defer func() {
		clear(l.pushed)
		l.metrics = StepMetrics{Wait: time.Since(start)}
	}()
	return CheckAllPushed(l.tensors, l.pushed)
}

// Metrics reports the last step: a local pipeline sends nothing.
func (l *Local) Metrics() StepMetrics { return l.metrics }

// Close does nothing.
func (l *Local) Close() error { return nil }
