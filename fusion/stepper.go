package fusion

import (
	"encoding/binary"
	"fmt"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/pipeline"
)

// Stepper is the bookkeeping every fusing pipeline shares: it checks each Push, and it
// learns the fusion plan.
//
// The plan needs the backprop order, which the model only reveals by running. So in the
// first step the Stepper only records the order; at the end of that backward pass rank 0's
// order is broadcast, every rank builds the same fusion buffers from it, and the pipeline
// replays the step's gradients (left in each Tensor.Grad) through the plan. From the second
// step on, gradients are processed as they arrive.
type Stepper struct {
	comm      dist.Communicator
	tensors   []pipeline.Tensor
	threshold int

	pushes  *pipeline.Pushes
	order   []int
	buckets []Bucket
	slots   []Slot
}

// Slot places a tensor in the fusion plan: its bucket, its position among the bucket's
// tensors and its element offset in the fused buffer. When a Fusion hands it to its Stage,
// Last also says whether the tensor is the last of its bucket to arrive in this step.
type Slot struct {
	Bucket, Index, Offset int
	Last                  bool
}

// NewStepper returns the bookkeeping of a pipeline over tensors with fusion buffers of at
// most thresholdBytes.
func NewStepper(comm dist.Communicator, tensors []pipeline.Tensor, thresholdBytes int) (*Stepper, error) {
	if thresholdBytes <= 0 {
		return nil, fmt.Errorf("fusion threshold must be positive, got %d bytes", thresholdBytes)
	}
	for i, t := range tensors {
		if t.ID != i {
			return nil, fmt.Errorf("tensor %q at position %d has id %d: ids must be positions", t.Name, i, t.ID)
		}
	}
	return &Stepper{comm: comm, tensors: tensors, threshold: thresholdBytes, pushes: pipeline.NewPushes(tensors)}, nil
}

// Push checks and records the push of tensor id. It reports whether the plan exists, in
// which case the caller processes grad now; in the first step it only records the order.
func (s *Stepper) Push(id int, grad []float32) (planned bool, err error) {
	if err := s.pushes.Push(id, grad); err != nil {
		return false, err
	}
	if s.buckets == nil {
		s.order = append(s.order, id)
		return false, nil
	}
	return true, nil
}

// EndBackward checks that every tensor was pushed. At the end of the first step it agrees
// on the plan and returns the backprop order, in which the caller replays the gradients
// left in Tensor.Grad; later it returns nil.
func (s *Stepper) EndBackward() (replay []int, err error) {
	if err := s.pushes.Complete(); err != nil {
		return nil, err
	}
	if s.buckets != nil {
		return nil, nil
	}
	if err := s.plan(); err != nil {
		return nil, err
	}
	return s.order, nil
}

// plan agrees on rank 0's backprop order and builds the fusion buffers from it.
func (s *Stepper) plan() error {
	wire := make([]byte, 4*len(s.order))
	for i, id := range s.order {
		binary.LittleEndian.PutUint32(wire[4*i:], uint32(id))
	}
	if err := s.comm.Broadcast(wire, 0); err != nil {
		return fmt.Errorf("agreeing on the backprop order: %w", err)
	}
	for i := range s.order {
		id := int(binary.LittleEndian.Uint32(wire[4*i:]))
		if id >= len(s.tensors) {
			return fmt.Errorf("agreeing on the backprop order: rank 0 names tensor %d of %d", id, len(s.tensors))
		}
		s.order[i] = id
	}
	return s.build()
}

// Adopt plans the fusion buffers from an order agreed earlier (in a checkpointed run), so
// that the first step needs no agreement and no replay.
func (s *Stepper) Adopt(order []int) error {
	if s.buckets != nil {
		return fmt.Errorf("adopting a backprop order: the plan exists already")
	}
	if len(order) != len(s.tensors) {
		return fmt.Errorf("adopting a backprop order of %d tensors for %d", len(order), len(s.tensors))
	}
	seen := make([]bool, len(s.tensors))
	for _, id := range order {
		if id < 0 || id >= len(s.tensors) || seen[id] {
			return fmt.Errorf("adopting a backprop order: tensor %d is out of range or repeated", id)
		}
		seen[id] = true
	}
	s.order = append([]int(nil), order...)
	return s.build()
}

// Order returns the agreed backprop order, nil before the plan.
func (s *Stepper) Order() []int {
	if s.buckets == nil {
		return nil
	}
	return s.order
}

// build makes the fusion buffers from the agreed order.
func (s *Stepper) build() error {
	buckets, err := PlanBuckets(s.order, s.numel, s.threshold)
	if err != nil {
		return fmt.Errorf("planning fusion buffers: %w", err)
	}
	s.use(buckets)
	return nil
}

// use makes buckets the fusion plan.
func (s *Stepper) use(buckets []Bucket) {
	s.slots = make([]Slot, len(s.tensors))
	for b, bucket := range buckets {
		for i, id := range bucket.Tensors {
			s.slots[id] = Slot{Bucket: b, Index: i, Offset: bucket.Offsets[i]}
		}
	}
	s.buckets = buckets
}

func (s *Stepper) numel(id int) int { return len(s.tensors[id].Grad) }

// CheckBuckets reports why buckets cannot replace the fusion plan: there is no plan yet, or
// they do not cut the agreed backprop order into consecutive buffers (see GroupBuckets).
func (s *Stepper) CheckBuckets(buckets []Bucket) error {
	if s.buckets == nil {
		return fmt.Errorf("no fusion plan yet: the backprop order is learnt in the first step")
	}
	return checkBuckets(buckets, s.order, s.numel)
}

// Rebucket replaces the fusion plan by buckets, which must pass CheckBuckets; the backprop
// order stays. Call it between steps only.
func (s *Stepper) Rebucket(buckets []Bucket) error {
	if err := s.CheckBuckets(buckets); err != nil {
		return err
	}
	s.use(cloneBuckets(buckets))
	return nil
}

// cloneBuckets copies buckets, so that the plan does not share slices with the caller.
func cloneBuckets(buckets []Bucket) []Bucket {
	out := make([]Bucket, len(buckets))
	for i, b := range buckets {
		out[i] = Bucket{Tensors: append([]int(nil), b.Tensors...), Offsets: append([]int(nil), b.Offsets...), Numel: b.Numel}
	}
	return out
}

// Buckets returns the fusion plan, nil before the end of the first step.
func (s *Stepper) Buckets() []Bucket { return s.buckets }

// Slot returns where tensor id sits in the plan.
func (s *Stepper) Slot(id int) Slot { return s.slots[id] }

// Tensors returns the tensors the pipeline synchronises.
func (s *Stepper) Tensors() []pipeline.Tensor { return s.tensors }

// NextStep forgets this step's pushes.
func (s *Stepper) NextStep() { s.pushes.Reset() }
