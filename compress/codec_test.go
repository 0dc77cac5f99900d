package compress

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// sparseSizes are the tensor lengths the sparse tests' receiver knows.
var sparseSizes = []int{10, 1, 1000, 0, 64}

func sparseNumel(id int) int {
	if id < 0 || id >= len(sparseSizes) {
		return -1
	}
	return sparseSizes[id]
}

func TestSparseRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		ts   []SparseTensor
	}{
		{"no tensors", nil},
		{"empty tensor", []SparseTensor{{ID: 3, Indices: []int32{}, Values: []float32{}}}},
		{"one pair", []SparseTensor{{ID: 1, Indices: []int32{0}, Values: []float32{-2.5}}}},
		{"several", []SparseTensor{
			{ID: 4, Indices: []int32{63, 0, 7}, Values: []float32{1, -1, 1e-30}},
			{ID: 0, Indices: []int32{9}, Values: []float32{float32(math.Copysign(0, -1))}},
			{ID: 2, Indices: []int32{999, 500}, Values: []float32{math.MaxFloat32, -math.SmallestNonzeroFloat32}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf, err := AppendSparse(nil, tc.ts)
			if err != nil {
				t.Fatal(err)
			}
			if len(buf) != SparseSize(tc.ts) {
				t.Fatalf("encoded %d bytes, SparseSize says %d", len(buf), SparseSize(tc.ts))
			}
			got, err := DecodeSparse(buf, sparseNumel, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.ts) {
				t.Fatalf("decoded %d tensors, want %d", len(got), len(tc.ts))
			}
			for i, w := range tc.ts {
				g := got[i]
				if g.ID != w.ID || !slices.Equal(g.Indices, w.Indices) || !sameBits(g.Values, w.Values) {
					t.Fatalf("tensor %d decoded as %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

func TestSparseEncodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		ts   []SparseTensor
	}{
		{"length mismatch", []SparseTensor{{ID: 0, Indices: []int32{1}, Values: nil}}},
		{"negative id", []SparseTensor{{ID: -1}}},
		{"id too large", []SparseTensor{{ID: math.MaxUint32 + 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf, err := AppendSparse([]byte{7}, tc.ts)
			if err == nil {
				t.Fatal("no error")
			}
			if !slices.Equal(buf, []byte{7}) {
				t.Fatalf("a failed encode changed dst to %v", buf)
			}
		})
	}
}

func TestSparseDecodeErrors(t *testing.T) {
	good, err := AppendSparse(nil, []SparseTensor{
		{ID: 0, Indices: []int32{1, 2}, Values: []float32{1, 2}},
		{ID: 4, Indices: []int32{3}, Values: []float32{3}},
	})
	if err != nil {
		t.Fatal(err)
	}
	u32 := func(b []byte, off int, v uint32) []byte {
		b = slices.Clone(b)
		binary.LittleEndian.PutUint32(b[off:], v)
		return b
	}
	// Layout of good: count at 0, header at 4 (id, n) and 12 (id, n), indices of tensor 0 at
	// 20 and 24, its values at 28 and 32, index of tensor 4 at 36, its value at 40.
	for _, tc := range []struct {
		name      string
		buf       []byte
		truncated bool
	}{
		{"empty", nil, true},
		{"short count", good[:3], true},
		{"cut header", good[:10], true},
		{"cut payload", good[:len(good)-1], true},
		{"huge tensor count", u32(good, 0, math.MaxUint32), true},
		{"huge pair count", u32(good, 8, math.MaxUint32), true},
		{"trailing bytes", append(slices.Clone(good), 0), false},
		{"fewer tensors than sent", u32(good, 0, 1), false},
		{"unknown tensor", u32(good, 4, 99), false},
		{"index past end", u32(good, 36, 64), false},
		{"negative index", u32(good, 20, math.MaxUint32), false},
		{"NaN value", u32(good, 28, 0x7fc00000), false},
		{"Inf value", u32(good, 40, 0xff800000), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeSparse(tc.buf, sparseNumel, nil)
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, ErrSparseTruncated); got != tc.truncated {
				t.Fatalf("error %q: truncated %v, want %v", err, got, tc.truncated)
			}
		})
	}
}

// TestSparseDecodeCorrupt feeds random corruptions of valid buffers to the decoder: it may
// accept or reject them, but it must never panic, and whatever it accepts must be in range.
func TestSparseDecodeCorrupt(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	var dst []SparseTensor
	for trial := range 20000 {
		ts := randSparse(r)
		buf, err := AppendSparse(nil, ts)
		if err != nil {
			t.Fatal(err)
		}
		switch trial % 4 {
		case 0: // flip random bytes
			for range 1 + r.IntN(4) {
				if len(buf) > 0 {
					buf[r.IntN(len(buf))] ^= byte(1 + r.IntN(255))
				}
			}
		case 1: // truncate
			buf = buf[:r.IntN(len(buf)+1)]
		case 2: // extend with garbage
			for range 1 + r.IntN(16) {
				buf = append(buf, byte(r.Uint32()))
			}
		default: // overwrite a whole word with an extreme value
			if len(buf) >= 4 {
				off := r.IntN(len(buf)/4) * 4
				binary.LittleEndian.PutUint32(buf[off:], []uint32{0, math.MaxUint32, math.MaxInt32, 1 << 31, 1000}[r.IntN(5)])
			}
		}
		dst, err = DecodeSparse(buf, sparseNumel, dst)
		if err != nil {
			continue
		}
		for _, d := range dst {
			for _, i := range d.Indices {
				if i < 0 || int(i) >= sparseSizes[d.ID] {
					t.Fatalf("accepted index %d for tensor %d of %d elements", i, d.ID, sparseSizes[d.ID])
				}
			}
		}
	}
}

func randSparse(r *rand.Rand) []SparseTensor {
	ts := make([]SparseTensor, r.IntN(4))
	for i := range ts {
		id := r.IntN(len(sparseSizes))
		n := 0
		if sparseSizes[id] > 0 {
			n = r.IntN(min(sparseSizes[id], 8) + 1)
		}
		ts[i] = SparseTensor{ID: id, Indices: make([]int32, n), Values: make([]float32, n)}
		for j := range n {
			ts[i].Indices[j] = int32(r.IntN(sparseSizes[id]))
			ts[i].Values[j] = float32(r.NormFloat64())
		}
	}
	return ts
}

func TestSparseDecodeReuses(t *testing.T) {
	ts := []SparseTensor{{ID: 2, Indices: []int32{5, 6, 7}, Values: []float32{1, 2, 3}}}
	buf, err := AppendSparse(nil, ts)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := DecodeSparse(buf, sparseNumel, nil)
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(10, func() {
		dst, err = DecodeSparse(buf, sparseNumel, dst)
	})
	if err != nil || allocs != 0 {
		t.Fatalf("steady-state decode: %v allocations, error %v", allocs, err)
	}
	enc := make([]byte, 0, SparseSize(ts))
	allocs = testing.AllocsPerRun(10, func() { enc, _ = AppendSparse(enc[:0], ts) })
	if allocs != 0 {
		t.Fatalf("encode into a large enough buffer: %v allocations", allocs)
	}
}

func TestScatterAverage(t *testing.T) {
	dst := [][]float32{make([]float32, 4), nil, {9, 9, 9}}
	ranks := [][]SparseTensor{
		{{ID: 0, Indices: []int32{0, 3}, Values: []float32{4, 8}}, {ID: 2, Indices: []int32{1}, Values: []float32{2}}},
		{{ID: 0, Indices: []int32{3, 1}, Values: []float32{4, -4}}},
		{}, // a rank that selected nothing from this buffer
		{{ID: 2, Indices: []int32{1, 1}, Values: []float32{1, 1}}},
	}
	if err := ScatterAverage(dst, ranks, 4); err != nil {
		t.Fatal(err)
	}
	want := [][]float32{{1, -1, 0, 3}, nil, {0, 1, 0}}
	if !reflect.DeepEqual(dst, want) {
		t.Fatalf("got %v, want %v", dst, want)
	}

	for _, tc := range []struct {
		name  string
		ranks [][]SparseTensor
		world int
	}{
		{"zero world", nil, 0},
		{"more ranks than world", [][]SparseTensor{{}, {}}, 1},
		{"no destination", [][]SparseTensor{{{ID: 1, Indices: []int32{0}, Values: []float32{1}}}}, 2},
		{"id past dst", [][]SparseTensor{{{ID: 7}}}, 2},
		{"index out of range", [][]SparseTensor{{}, {{ID: 2, Indices: []int32{3}, Values: []float32{1}}}}, 2},
		{"length mismatch", [][]SparseTensor{{{ID: 0, Indices: []int32{0}}}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := [][]float32{slices.Clone(dst[0]), nil, slices.Clone(dst[2])}
			if err := ScatterAverage(dst, tc.ranks, tc.world); err == nil {
				t.Fatal("no error")
			}
			if !reflect.DeepEqual(dst, before) {
				t.Fatalf("a failed call changed dst to %v", dst)
			}
		})
	}
}

func TestScatterAdd(t *testing.T) {
	dst := [][]float32{{1, 1}, {5}}
	if err := ScatterAdd(dst, []SparseTensor{{ID: 0, Indices: []int32{1, 1}, Values: []float32{2, 3}}}); err != nil {
		t.Fatal(err)
	}
	if want := [][]float32{{1, 6}, {5}}; !reflect.DeepEqual(dst, want) {
		t.Fatalf("got %v, want %v", dst, want)
	}
	err := ScatterAdd(dst, []SparseTensor{
		{ID: 1, Indices: []int32{0}, Values: []float32{1}},
		{ID: 0, Indices: []int32{2}, Values: []float32{1}},
	})
	if err == nil {
		t.Fatal("out-of-range index accepted")
	}
	if want := [][]float32{{1, 6}, {5}}; !reflect.DeepEqual(dst, want) {
		t.Fatalf("a failed call changed dst to %v", dst)
	}
}

// TestSparsePipeline runs the whole sparse path for a few simulated ranks: residual, top-k,
// encode, decode, average; and checks it against a dense computation.
func TestSparsePipeline(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	const world, n, k = 3, 500, 20
	var s TopK
	want := make([]float64, n)
	var bufs [][]byte
	for range world {
		g := randGrad(r, n, 0)
		idx, err := s.Select(g, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		vals := make([]float32, len(idx))
		for j, i := range idx {
			vals[j] = g[i]
			want[i] += float64(g[i]) / world
		}
		buf, err := AppendSparse(nil, []SparseTensor{{ID: 2, Indices: idx, Values: vals}})
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, buf)
	}
	numel := func(id int) int {
		if id == 2 {
			return n
		}
		return -1
	}
	ranks := make([][]SparseTensor, world)
	for i, b := range bufs {
		var err error
		if ranks[i], err = DecodeSparse(b, numel, nil); err != nil {
			t.Fatal(err)
		}
	}
	dst := [][]float32{nil, nil, make([]float32, n)}
	if err := ScatterAverage(dst, ranks, world); err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		if d := float64(dst[2][i]) - w; math.Abs(d) > 1e-5*math.Max(1, math.Abs(w)) {
			t.Fatalf("element %d: %g, want %g", i, dst[2][i], w)
		}
	}
}

// FuzzDecodeSparse checks that no input makes the decoder panic or accept an index outside
// its tensor. Run with go test -fuzz FuzzDecodeSparse ./pipeline.
func FuzzDecodeSparse(f *testing.F) {
	r := rand.New(rand.NewPCG(17, 18))
	for range 8 {
		buf, err := AppendSparse(nil, randSparse(r))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(buf)
	}
	f.Fuzz(func(t *testing.T, buf []byte) {
		ts, err := DecodeSparse(buf, sparseNumel, nil)
		if err != nil {
			return
		}
		for _, d := range ts {
			for _, i := range d.Indices {
				if i < 0 || int(i) >= sparseSizes[d.ID] {
					t.Fatalf("accepted index %d for tensor %d of %d elements", i, d.ID, sparseSizes[d.ID])
				}
			}
		}
	})
}

// TestScatterAverageSharedRanks: ranks that hold one decoded buffer (a simulated rank
// standing for many) average to the same bits as ranks holding copies of it.
func TestScatterAverageSharedRanks(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	own := []SparseTensor{{ID: 0, Indices: []int32{1, 4, 7}}, {ID: 1, Indices: []int32{0, 2}}}
	for i := range own {
		for range own[i].Indices {
			own[i].Values = append(own[i].Values, float32(r.NormFloat64()*1e-3))
		}
	}
	other := []SparseTensor{{ID: 0, Indices: []int32{4, 5}, Values: []float32{0.25, -1e-7}}}
	copyOf := func(ts []SparseTensor) []SparseTensor {
		out := make([]SparseTensor, len(ts))
		for i, t := range ts {
			out[i] = SparseTensor{ID: t.ID, Indices: slices.Clone(t.Indices), Values: slices.Clone(t.Values)}
		}
		return out
	}
	for _, shared := range [][]int{{0, 1, 2}, {1, 2, 3, 4, 5, 6}} {
		ranks := make([][]SparseTensor, 8)
		copies := make([][]SparseTensor, 8)
		for i := range ranks {
			ranks[i], copies[i] = other, copyOf(other)
			if slices.Contains(shared, i) {
				ranks[i], copies[i] = own, copyOf(own)
			}
		}
		got := [][]float32{make([]float32, 8), make([]float32, 3)}
		want := [][]float32{make([]float32, 8), make([]float32, 3)}
		if err := ScatterAverage(got, ranks, 8); err != nil {
			t.Fatal(err)
		}
		if err := ScatterAverage(want, copies, 8); err != nil {
			t.Fatal(err)
		}
		for id := range got {
			for i := range got[id] {
				if math.Float32bits(got[id][i]) != math.Float32bits(want[id][i]) {
					t.Fatalf("shared %v: tensor %d element %d is %v, with copies %v", shared, id, i, got[id][i], want[id][i])
				}
			}
		}
	}
}
