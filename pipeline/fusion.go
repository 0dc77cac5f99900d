package pipeline

import "fmt"

// Bucket is one fusion buffer: tensors that travel in one collective, in the order their
// gradients become ready, and the offset of each inside the fused buffer.
type Bucket struct {
	Tensors []int // tensor ids, in backprop order
	Offsets []int // element offset of each tensor in the fused buffer
	Numel   int   // elements in the fused buffer
}

// PlanBuckets groups tensors, taken in backprop order, into fusion buffers of at most
// thresholdBytes (4-byte elements), as Horovod's tensor fusion does: a tensor that would
// overflow the current buffer starts the next one, and a tensor larger than the threshold
// travels alone. Every rank computes the same plan from the same order.
func PlanBuckets(order []int, numel func(id int) int, thresholdBytes int) ([]Bucket, error) {
	if thresholdBytes <= 0 {
		return nil, fmt.Errorf("fusion threshold must be positive, got %d bytes", thresholdBytes)
	}
	seen := make(map[int]bool, len(order))
	var buckets []Bucket
	var cur Bucket
	for _, id := range order {
		if seen[id] {
			return nil, fmt.Errorf("tensor %d appears twice in the backprop order", id)
		}
		seen[id] = true
		n := numel(id)
		if len(cur.Tensors) > 0 && 4*(cur.Numel+n) > thresholdBytes {
			buckets = append(buckets, cur)
			cur = Bucket{}
		}
		cur.Tensors = append(cur.Tensors, id)
		cur.Offsets = append(cur.Offsets, cur.Numel)
		cur.Numel += n
	}
	if len(cur.Tensors) > 0 {
		buckets = append(buckets, cur)
	}
	return buckets, nil
}
