package pipeline

// CheckPush reports whether a Push of grad for tensor id is valid in a step where pushed
// marks the tensors already pushed.
func CheckPush(tensors []Tensor, pushed []bool, id int, grad []float32) error {
	if id < 0 || id >= len(tensors) {
		return &UnknownTensorError{ID: id, Count: len(tensors)}
	}
	if len(grad) != len(tensors[id].Grad) {
		return &SizeError{Tensor: tensors[id], Got: len(grad)}
	}
	if pushed[id] {
		return &DuplicatePushError{Tensor: tensors[id]}
	}
	return nil
}

// CheckAllPushed reports the first tensor a step ended without.
func CheckAllPushed(tensors []Tensor, pushed []bool) error {
	for i, done := range pushed {
		if !done {
			return &MissingPushError{Tensor: tensors[i]}
		}
	}
	return nil
}

// TotalNumel counts the elements of all tensors.
func TotalNumel(tensors []Tensor) int {
	n := 0
	for _, t := range tensors {
		n += len(t.Grad)
	}
	return n
}

// RingAllReduceBytes is what one rank sends in a ring allreduce of numel float32 values on
// size ranks: 2(P-1)/P of the buffer (reduce-scatter, then allgather).
func RingAllReduceBytes(numel, size int) int64 {
	if size <= 1 {
		return 0
	}
	return int64(2 * (size - 1) * 4 * numel / size)
}
