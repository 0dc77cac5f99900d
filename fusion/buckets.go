package fusion

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

// GroupBuckets cuts the backprop order into consecutive fusion buffers of counts[i] tensors
// each, for pipelines that size their buffers themselves rather than by a byte threshold
// (SAFusion). The counts must be positive and add up to the number of tensors in order.
func GroupBuckets(order []int, numel func(id int) int, counts []int) ([]Bucket, error) {
	total := 0
	for i, c := range counts {
		if c <= 0 {
			return nil, fmt.Errorf("fusion buffer %d would hold %d tensors", i, c)
		}
		total += c
	}
	if total != len(order) {
		return nil, fmt.Errorf("fusion buffers hold %d tensors, the backprop order has %d", total, len(order))
	}
	buckets := make([]Bucket, 0, len(counts))
	rest := order
	for _, c := range counts {
		var b Bucket
		for _, id := range rest[:c] {
			b.Tensors = append(b.Tensors, id)
			b.Offsets = append(b.Offsets, b.Numel)
			b.Numel += numel(id)
		}
		buckets = append(buckets, b)
		rest = rest[c:]
	}
	return buckets, nil
}

// checkBuckets reports why buckets is not a fusion plan of order: the buckets, taken one
// after the other, must list exactly the tensors of order in that order, with offsets and
// sizes that match the tensors' element counts.
func checkBuckets(buckets []Bucket, order []int, numel func(id int) int) error {
	pos := 0
	for b, bucket := range buckets {
		if len(bucket.Tensors) == 0 {
			return fmt.Errorf("fusion buffer %d is empty", b)
		}
		if len(bucket.Offsets) != len(bucket.Tensors) {
			return fmt.Errorf("fusion buffer %d has %d tensors but %d offsets", b, len(bucket.Tensors), len(bucket.Offsets))
		}
		n := 0
		for i, id := range bucket.Tensors {
			if pos >= len(order) || order[pos] != id {
				return fmt.Errorf("fusion buffer %d: tensor %d is not the next in the backprop order", b, id)
			}
			if bucket.Offsets[i] != n {
				return fmt.Errorf("fusion buffer %d: tensor %d at offset %d, want %d", b, id, bucket.Offsets[i], n)
			}
			n += numel(id)
			pos++
		}
		if bucket.Numel != n {
			return fmt.Errorf("fusion buffer %d claims %d elements, its tensors have %d", b, bucket.Numel, n)
		}
	}
	if pos != len(order) {
		return fmt.Errorf("fusion buffers hold %d tensors, the backprop order has %d", pos, len(order))
	}
	return nil
}
