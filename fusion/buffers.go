package fusion

import (
	"fmt"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/pipeline"
)

// DenseBuffer is the dense part of a fusion buffer: the gradients of some tensors packed
// back to back, averaged across ranks by one allreduce.
type DenseBuffer struct {
	ids     []int
	offsets []int
	buf     []float32
}

// NewDenseBuffer returns the buffer of tensors ids (in their order in the buffer).
func NewDenseBuffer(tensors []pipeline.Tensor, ids []int) *DenseBuffer {
	d := &DenseBuffer{ids: ids, offsets: make([]int, len(ids))}
	n := 0
	for i, id := range ids {
		d.offsets[i] = n
		n += len(tensors[id].Grad)
	}
	d.buf = make([]float32, n)
	return d
}

// Put copies the gradient of the buffer's i-th tensor into place.
func (d *DenseBuffer) Put(i int, grad []float32) { copy(d.buf[d.offsets[i]:], grad) }

// Numel is the number of elements in the buffer.
func (d *DenseBuffer) Numel() int { return len(d.buf) }

// AllReduce starts averaging the buffer across ranks.
func (d *DenseBuffer) AllReduce(comm dist.Communicator) Completion {
	return comm.AllReduceAsync(d.buf, dist.Average).Wait
}

// Unpack copies the averaged gradients back into the tensors' Grad.
func (d *DenseBuffer) Unpack(tensors []pipeline.Tensor) {
	for i, id := range d.ids {
		g := tensors[id].Grad
		copy(g, d.buf[d.offsets[i]:d.offsets[i]+len(g)])
	}
}

// SparseBuffer is the sparse part of a fusion buffer: the selected (index, value) pairs of
// some tensors, encoded into one message and exchanged by one allgather, then
// scatter-averaged into the tensors' Grad.
type SparseBuffer struct {
	// Parts holds this rank's pairs, one entry per tensor of the buffer in buffer order.
	// The pipeline fills Indices and Values before the allgather starts.
	Parts []compress.SparseTensor

	member  map[int]int // tensor id -> element count, for the buffer's tensors only
	dst     [][]float32 // by tensor id: Grad of the buffer's tensors, nil elsewhere
	send    []byte
	out     [][]byte
	decoded [][]compress.SparseTensor // by rank: its scratch for decoding
	views   [][]compress.SparseTensor // by rank: its decoded message, maybe another rank's
}

// NewSparseBuffer returns the sparse buffer of tensors ids.
func NewSparseBuffer(tensors []pipeline.Tensor, ids []int) *SparseBuffer {
	s := &SparseBuffer{Parts: make([]compress.SparseTensor, len(ids)), member: make(map[int]int, len(ids)), dst: make([][]float32, len(tensors))}
	for i, id := range ids {
		s.Parts[i].ID = id
		s.member[id] = len(tensors[id].Grad)
		s.dst[id] = tensors[id].Grad
	}
	return s
}

// AllGather encodes Parts and starts exchanging them with every rank.
func (s *SparseBuffer) AllGather(comm dist.Communicator) Completion {
	var err error
	if s.send, err = compress.AppendSparse(s.send[:0], s.Parts); err != nil {
		return func() error { return err }
	}
	h := comm.AllGatherVAsync(s.send)
	return func() error {
		out, err := h.Wait()
		s.out = out
		return err
	}
}

// Received returns the messages the last allgather brought, by rank, for a pipeline that
// checks them beyond what Average does.
func (s *SparseBuffer) Received() [][]byte { return s.out }

// Average sets every tensor of the buffer to the average of all ranks' sparse gradients;
// elements no rank sent become zero. It checks every rank's message first: an unknown or
// foreign tensor, an index out of range or a non-finite value is an error naming the rank.
// A message that is the very bytes of the rank before it (a simulated rank standing for
// many returns one copy for all) is decoded once, so memory does not grow with the ranks.
func (s *SparseBuffer) Average() error {
	if len(s.decoded) < len(s.out) {
		s.decoded = append(s.decoded, make([][]compress.SparseTensor, len(s.out)-len(s.decoded))...)
	}
	s.views = append(s.views[:0], make([][]compress.SparseTensor, len(s.out))...)
	numel := func(id int) int {
		if n, ok := s.member[id]; ok {
			return n
		}
		return -1
	}
	for r, msg := range s.out {
		if r > 0 && sameBytes(msg, s.out[r-1]) {
			s.views[r] = s.views[r-1]
			continue
		}
		var err error
		if s.decoded[r], err = compress.DecodeSparse(msg, numel, s.decoded[r]); err != nil {
			return fmt.Errorf("sparse gradients from rank %d: %w", r, err)
		}
		s.views[r] = s.decoded[r]
	}
	return compress.ScatterAverage(s.dst, s.views, len(s.out))
}

// sameBytes reports whether a and b are one slice of memory, not merely equal.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
