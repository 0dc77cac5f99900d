package compress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// SparseTensor is the part of one tensor's gradient a rank sends after top-k selection:
// Values[j] belongs at element Indices[j] of tensor ID.
type SparseTensor struct {
	ID      int
	Indices []int32
	Values  []float32
}

// The sparse wire format carries the selected pairs of several tensors of one fusion
// buffer, so the whole buffer goes out in one allgather. All fields are little-endian:
//
//	u32 tensor count T
//	T × (u32 tensor id, u32 pair count)
//	for each tensor in header order: count × i32 index, then count × f32 value
//
// The header comes first so a receiver can check every length before reading any pair, and
// indices and values are kept in separate runs so each is one contiguous copy.
//
// The sizes are exported for pipelines that must know a message's length before it is
// encoded (SAFusion checks every rank's against it).
const (
	SparseCountBytes  = 4
	SparseHeaderBytes = 8 // per tensor: id, pair count
	SparsePairBytes   = 8 // index, value
)

// ErrSparseTruncated reports a sparse buffer shorter than its own header says.
var ErrSparseTruncated = errors.New("compress: sparse buffer truncated")

// SparseSize is the encoded size of ts in bytes.
func SparseSize(ts []SparseTensor) int {
	n := SparseCountBytes + SparseHeaderBytes*len(ts)
	for _, t := range ts {
		n += SparsePairBytes * len(t.Indices)
	}
	return n
}

// AppendSparse appends the encoding of ts to dst and returns the extended buffer; with a
// dst of enough capacity it does not allocate.
func AppendSparse(dst []byte, ts []SparseTensor) ([]byte, error) {
	if uint64(len(ts)) > math.MaxUint32 {
		return dst, fmt.Errorf("compress: encoding %d sparse tensors: too many", len(ts))
	}
	for _, t := range ts {
		if len(t.Indices) != len(t.Values) {
			return dst, fmt.Errorf("compress: encoding tensor %d: %d indices but %d values", t.ID, len(t.Indices), len(t.Values))
		}
		if t.ID < 0 || uint64(t.ID) > math.MaxUint32 {
			return dst, fmt.Errorf("compress: encoding tensor %d: id does not fit the wire format", t.ID)
		}
		if uint64(len(t.Indices)) > math.MaxUint32 {
			return dst, fmt.Errorf("compress: encoding tensor %d: %d pairs do not fit the wire format", t.ID, len(t.Indices))
		}
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(ts)))
	for _, t := range ts {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(t.ID))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(t.Indices)))
	}
	for _, t := range ts {
		for _, i := range t.Indices {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(i))
		}
		for _, v := range t.Values {
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
		}
	}
	return dst, nil
}

// DecodeSparse decodes buf into dst[:0], reusing the Indices and Values capacity of dst's
// elements so that steady-state decoding does not allocate, and returns the result.
//
// numel reports the element count of a tensor id, or a negative number if the receiver has
// no such tensor. Every length is checked before it is used, so a malformed or truncated
// buffer is an error, never a panic, and it is not trusted for allocation sizes beyond its
// own length. Rejected too: unknown tensor ids, indices outside their tensor, non-finite
// values (which would poison every rank's model) and trailing bytes.
func DecodeSparse(buf []byte, numel func(id int) int, dst []SparseTensor) ([]SparseTensor, error) {
	out := dst[:0]
	if len(buf) < SparseCountBytes {
		return out, fmt.Errorf("%w: %d bytes, need %d for the tensor count", ErrSparseTruncated, len(buf), SparseCountBytes)
	}
	count := uint64(binary.LittleEndian.Uint32(buf))
	body := buf[SparseCountBytes:]
	if count > uint64(len(body))/SparseHeaderBytes {
		return out, fmt.Errorf("%w: header of %d tensors needs %d bytes, have %d", ErrSparseTruncated, count, count*SparseHeaderBytes, len(body))
	}
	header := body[:count*SparseHeaderBytes]
	data := body[count*SparseHeaderBytes:]
	// Check the header as a whole first, so the payload length is known to match before
	// any pair is read.
	var pairs uint64
	for h := header; len(h) > 0; h = h[SparseHeaderBytes:] {
		id := int64(binary.LittleEndian.Uint32(h))
		pairs += uint64(binary.LittleEndian.Uint32(h[4:]))
		if n := numel(int(id)); n < 0 {
			return out, fmt.Errorf("compress: sparse buffer names unknown tensor %d", id)
		}
	}
	if want := pairs * SparsePairBytes; want != uint64(len(data)) {
		if want > uint64(len(data)) {
			return out, fmt.Errorf("%w: %d pairs need %d bytes, have %d", ErrSparseTruncated, pairs, want, len(data))
		}
		return out, fmt.Errorf("compress: sparse buffer has %d trailing bytes", uint64(len(data))-want)
	}
	for h := header; len(h) > 0; h = h[SparseHeaderBytes:] {
		id := int(binary.LittleEndian.Uint32(h))
		c := int(binary.LittleEndian.Uint32(h[4:]))
		n := numel(id)
		if len(out) < cap(out) {
			out = out[:len(out)+1]
		} else {
			out = append(out, SparseTensor{})
		}
		t := &out[len(out)-1]
		t.ID = id
		t.Indices = grow(t.Indices, c)
		t.Values = grow(t.Values, c)
		for j := range c {
			i := int32(binary.LittleEndian.Uint32(data[4*j:]))
			if i < 0 || int(i) >= n {
				return out, fmt.Errorf("compress: sparse tensor %d: index %d out of range [0, %d)", id, i, n)
			}
			t.Indices[j] = i
		}
		data = data[4*c:]
		for j := range c {
			v := math.Float32frombits(binary.LittleEndian.Uint32(data[4*j:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return out, fmt.Errorf("compress: sparse tensor %d: non-finite value %v for index %d", id, v, t.Indices[j])
			}
			t.Values[j] = v
		}
		data = data[4*c:]
	}
	return out, nil
}

// grow returns s resized to n elements, reusing its storage when it is large enough.
func grow[E any](s []E, n int) []E {
	if cap(s) < n {
		return make([]E, n)
	}
	return s[:n]
}

// ScatterAdd adds every pair of ts into the dense gradients dst, indexed by tensor id
// (dst[id] is nil for a tensor the caller does not hold). Everything is checked before
// anything is added, so on error dst is unchanged.
func ScatterAdd(dst [][]float32, ts []SparseTensor) error {
	if err := checkScatter(dst, ts); err != nil {
		return err
	}
	scatterAdd(dst, ts)
	return nil
}

// ScatterAverage sets every non-nil dst[id] to the average over world ranks of the sparse
// gradients in ranks (one decoded buffer per rank): it zeroes the destinations, adds every
// rank's pairs in rank order and divides by world. Adding in rank order makes the
// floating-point result identical on every rank that holds the same buffers, which keeps
// the model replicas in step. On error dst is unchanged.
func ScatterAverage(dst [][]float32, ranks [][]SparseTensor, world int) error {
	if world <= 0 {
		return fmt.Errorf("compress: averaging over %d ranks", world)
	}
	if len(ranks) > world {
		return fmt.Errorf("compress: averaging %d ranks' gradients over a world of %d", len(ranks), world)
	}
	for r, ts := range ranks {
		if err := checkScatter(dst, ts); err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
	}
	for _, d := range dst {
		clear(d)
	}
	for r := 0; r < len(ranks); {
		// Ranks that hold the very same decoded buffer (a simulated rank standing for
		// many) are added in one pass, each pair as many times in a row: an element gets
		// the same additions in the same order as rank after rank would give it (an index
		// appears once per tensor, as every selector gives it; SAFusion's zero padding
		// repeats one but adds nothing), while the gradient is walked once instead of once
		// per rank.
		n := 1
		for r+n < len(ranks) && sameTensors(ranks[r+n], ranks[r]) {
			n++
		}
		scatterAddTimes(dst, ranks[r], n)
		r += n
	}
	scale := float32(world)
	for _, d := range dst {
		for i := range d {
			d[i] /= scale
		}
	}
	return nil
}

// checkScatter reports why ts cannot be scattered into dst, if it cannot.
func checkScatter(dst [][]float32, ts []SparseTensor) error {
	for _, t := range ts {
		if t.ID < 0 || t.ID >= len(dst) || dst[t.ID] == nil {
			return fmt.Errorf("compress: scatter of sparse tensor %d: no destination", t.ID)
		}
		if len(t.Indices) != len(t.Values) {
			return fmt.Errorf("compress: scatter of sparse tensor %d: %d indices but %d values", t.ID, len(t.Indices), len(t.Values))
		}
		d := dst[t.ID]
		for _, i := range t.Indices {
			if i < 0 || int(i) >= len(d) {
				return fmt.Errorf("compress: scatter of sparse tensor %d: index %d out of range [0, %d)", t.ID, i, len(d))
			}
		}
	}
	return nil
}

// sameTensors reports whether a and b are one slice of memory, not merely equal.
func sameTensors(a, b []SparseTensor) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}

// scatterAddTimes is scatterAdd of ts, n times over.
func scatterAddTimes(dst [][]float32, ts []SparseTensor, n int) {
	if n == 1 {
		scatterAdd(dst, ts)
		return
	}
	for _, t := range ts {
		d := dst[t.ID]
		for j, i := range t.Indices {
			v := d[i]
			for range n {
				v += t.Values[j]
			}
			d[i] = v
		}
	}
}

// scatterAdd is ScatterAdd without the checks.
func scatterAdd(dst [][]float32, ts []SparseTensor) {
	for _, t := range ts {
		d := dst[t.ID]
		for j, i := range t.Indices {
			d[i] += t.Values[j]
		}
	}
}
