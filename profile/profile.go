// Package profile describes the compute of one training step of a model, as the scale
// simulator consumes it: the gradient tensors in the order backprop makes them ready, their
// sizes and dimensions, and how long forward, each tensor's share of backward and the optimizer update take
// on one worker. A profile is measured by our own trainer (train --profile-out) or built from
// a published architecture and a stated iteration time (see FromFLOPs), and is stored as JSON.
package profile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/ssfusion/ssfusion/internal/atomicfile"
)

// Profile is one worker's compute in one training step.
type Profile struct {
	// Model names the model, e.g. "resnet50".
	Model string `json:"model"`
	// Source says where the times come from: "measured by ..." or "FLOP split of ...".
	Source string `json:"source,omitempty"`
	// BatchSize is the number of samples one worker processes per step.
	BatchSize int `json:"batch_size"`
	// ForwardMS is the time from the step's start to the start of backward.
	ForwardMS float64 `json:"forward_ms"`
	// Tensors are the gradient tensors in backprop order, the order in which they become
	// ready.
	Tensors []Tensor `json:"tensors"`
	// TailMS is backward's time after the last gradient is ready (zero for most models).
	TailMS float64 `json:"tail_ms,omitempty"`
	// UpdateMS is the time after the gradients are aggregated: clipping and the optimizer.
	UpdateMS float64 `json:"update_ms"`
	// ComputeJitter, when measured, holds by step every rank's compute (forward and
	// backward) over the mean of rank 0's, whose means the times above are: ranks whose
	// compute varies wait for the slowest at every collective, and a simulation of ranks
	// that move real data replays measured steps, one row for all its ranks, so that they
	// straggle as much, and as much together, as the measured ones. Empty: every step
	// takes the same time.
	ComputeJitter [][]float64 `json:"compute_jitter,omitempty"`
}

// Tensor is one gradient tensor.
type Tensor struct {
	Name  string `json:"name"`
	Numel int    `json:"numel"`
	// Dims is the number of dimensions of the tensor's parameter (4 for a convolution
	// kernel, 2 for a linear weight or an embedding, 1 for a bias or a norm's scale); 0 or
	// absent when unknown, as in profiles written before it was recorded.
	Dims int `json:"dims,omitempty"`
	// Shape is the parameter's shape as the framework stores it (PyTorch's layouts);
	// absent when unknown. A pipeline that compresses gradients as matrices needs it.
	Shape []int `json:"shape,omitempty"`
	// BackwardMS is the backward time from the previous tensor's readiness (or backward's
	// start, for the first) to this tensor's.
	BackwardMS float64 `json:"backward_ms"`
}

// Load reads and checks a profile.
func Load(path string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading profile: %w", err)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w", path, err)
	}
	return p, nil
}

// Parse decodes and checks a profile; unknown keys are errors, so that a misspelt key is
// not silently ignored.
func Parse(data []byte) (*Profile, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Profile
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("decoding JSON: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Check reports what makes the profile unusable.
func (p *Profile) Check() error {
	if p.Model == "" {
		return errors.New(`"model" is missing`)
	}
	if p.BatchSize <= 0 {
		return fmt.Errorf(`"batch_size" must be positive, got %d`, p.BatchSize)
	}
	if len(p.Tensors) == 0 {
		return errors.New(`"tensors" is empty`)
	}
	for name, v := range map[string]float64{"forward_ms": p.ForwardMS, "tail_ms": p.TailMS, "update_ms": p.UpdateMS} {
		if !validTime(v) {
			return fmt.Errorf("%q must be a time in [0, %d] ms, got %g", name, maxMS, v)
		}
	}
	for i, row := range p.ComputeJitter {
		if len(row) == 0 || len(row) != len(p.ComputeJitter[0]) {
			return fmt.Errorf("compute_jitter[%d] has %d ranks, the first step %d", i, len(row), len(p.ComputeJitter[0]))
		}
		for r, v := range row {
			if !(v > 0) || v > 1000 {
				return fmt.Errorf("compute_jitter[%d][%d] must be a ratio in (0, 1000], got %g", i, r, v)
			}
		}
	}
	seen := make(map[string]bool, len(p.Tensors))
	for i, t := range p.Tensors {
		switch {
		case t.Name == "":
			return fmt.Errorf("tensor %d has no name", i)
		case seen[t.Name]:
			return fmt.Errorf("tensor %d: name %q appears twice", i, t.Name)
		case t.Numel <= 0:
			return fmt.Errorf("tensor %d (%s): numel must be positive, got %d", i, t.Name, t.Numel)
		case t.Dims < 0:
			return fmt.Errorf("tensor %d (%s): dims must not be negative (0: unknown), got %d", i, t.Name, t.Dims)
		case t.Shape != nil && !shapeFits(t.Shape, t.Numel, t.Dims):
			return fmt.Errorf("tensor %d (%s): shape %v does not hold %d elements in %d dimensions", i, t.Name, t.Shape, t.Numel, t.Dims)
		case !validTime(t.BackwardMS):
			return fmt.Errorf("tensor %d (%s): backward_ms must be a time in [0, %d] ms, got %g", i, t.Name, maxMS, t.BackwardMS)
		}
		seen[t.Name] = true
	}
	return nil
}

// shapeFits reports whether shape holds numel elements in dims dimensions (any number when
// dims is 0, unknown).
func shapeFits(shape []int, numel, dims int) bool {
	if dims != 0 && len(shape) != dims {
		return false
	}
	n := 1
	for _, d := range shape {
		if d <= 0 {
			return false
		}
		n *= d
	}
	return n == numel
}

// maxMS bounds every time of a profile: a day, far beyond any training step, and far
// inside what a time.Duration holds.
const maxMS = 24 * 3600 * 1000

func validTime(ms float64) bool { return ms >= 0 && ms <= maxMS }

// Save writes the profile atomically as indented JSON.
func (p *Profile) Save(path string) error {
	if err := p.Check(); err != nil {
		return fmt.Errorf("profile for %s: %w", path, err)
	}
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding profile: %w", err)
	}
	return atomicfile.Write(path, append(data, '\n'))
}

// Params is the number of gradient elements.
func (p *Profile) Params() int {
	n := 0
	for _, t := range p.Tensors {
		n += t.Numel
	}
	return n
}

// BackwardMS is the whole backward pass: every tensor's share and the tail.
func (p *Profile) BackwardMS() float64 {
	ms := p.TailMS
	for _, t := range p.Tensors {
		ms += t.BackwardMS
	}
	return ms
}

// IterationMS is the compute of one step with no communication: forward, backward and
// update.
func (p *Profile) IterationMS() float64 { return p.ForwardMS + p.BackwardMS() + p.UpdateMS }

// Scaled returns a copy whose times are divided by speed: a profile measured here, replayed
// on hardware speed times faster.
func (p *Profile) Scaled(speed float64) (*Profile, error) {
	if !(speed > 0) || math.IsInf(speed, 0) {
		return nil, fmt.Errorf("compute speed factor must be positive and finite, got %g", speed)
	}
	q := *p
	q.Tensors = make([]Tensor, len(p.Tensors))
	for i, t := range p.Tensors {
		t.BackwardMS /= speed
		q.Tensors[i] = t
	}
	q.ForwardMS /= speed
	q.TailMS /= speed
	q.UpdateMS /= speed
	if speed != 1 {
		q.Source = fmt.Sprintf("%s, sped up %gx", p.Source, speed)
	}
	if err := q.Check(); err != nil {
		return nil, fmt.Errorf("sped up %gx: %w", speed, err)
	}
	return &q, nil
}

// Duration converts milliseconds to a Duration, saturating at the largest one.
func Duration(ms float64) time.Duration {
	ns := ms * float64(time.Millisecond)
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}
