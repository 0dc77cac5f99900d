package pipeline

// Pushes keeps the push contract of one step: every tensor pushed exactly once, by a known
// id and with a gradient of its tensor's size. Every pipeline checks its pushes with one.
type Pushes struct {
	tensors []Tensor
	pushed  []bool
}

// NewPushes returns the bookkeeping of a step over tensors.
func NewPushes(tensors []Tensor) *Pushes {
	return &Pushes{tensors: tensors, pushed: make([]bool, len(tensors))}
}

// Push checks a push of grad for tensor id and records it; on error nothing is recorded.
func (p *Pushes) Push(id int, grad []float32) error {
	if id < 0 || id >= len(p.tensors) {
		return &UnknownTensorError{ID: id, Count: len(p.tensors)}
	}
	if len(grad) != len(p.tensors[id].Grad) {
		return &SizeError{Tensor: p.tensors[id], Got: len(grad)}
	}
	if p.pushed[id] {
		return &DuplicatePushError{Tensor: p.tensors[id]}
	}
	p.pushed[id] = true
	return nil
}

// Complete reports the first tensor the step has not pushed.
func (p *Pushes) Complete() error {
	for i, done := range p.pushed {
		if !done {
			return &MissingPushError{Tensor: p.tensors[i]}
		}
	}
	return nil
}

// Reset forgets the step's pushes.
func (p *Pushes) Reset() { clear(p.pushed) }

// Sizes returns the element count of each tensor, by id.
func Sizes(tensors []Tensor) []int {
	sizes := make([]int, len(tensors))
	for i, t := range tensors {
		sizes[i] = len(t.Grad)
	}
	return sizes
}

// TotalNumel counts the elements of all tensors.
func TotalNumel(tensors []Tensor) int {
	n := 0
	for _, t := range tensors {
		n += len(t.Grad)
	}
	return n
}
