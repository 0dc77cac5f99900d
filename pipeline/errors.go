package pipeline

import "fmt"

// UnknownTensorError reports a Push for a tensor index the pipeline was not built with.
type UnknownTensorError struct{ ID, Count int }

func (e *UnknownTensorError) Error() string {
	return fmt.Sprintf("pipeline: push of unknown tensor %d (the model has %d)", e.ID, e.Count)
}

// SizeError reports a gradient whose length differs from its tensor's.
type SizeError struct {
	Tensor Tensor
	Got    int
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("pipeline: gradient of %s has %d elements, want %d", e.Tensor.Name, e.Got, len(e.Tensor.Grad))
}

// DuplicatePushError reports a tensor pushed twice in one step.
type DuplicatePushError struct{ Tensor Tensor }

func (e *DuplicatePushError) Error() string {
	return fmt.Sprintf("pipeline: gradient of %s pushed twice in one step", e.Tensor.Name)
}

// MissingPushError reports a tensor never pushed before Wait.
type MissingPushError struct{ Tensor Tensor }

func (e *MissingPushError) Error() string {
	return fmt.Sprintf("pipeline: step ended without a gradient for %s", e.Tensor.Name)
}
