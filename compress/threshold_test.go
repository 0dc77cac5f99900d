package compress

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
)

func TestAppendAtLeast(t *testing.T) {
	g := []float32{0.5, -2, 1, -1, 0, 3, float32(math.Copysign(0, -1)), float32(math.NaN())}
	for _, tc := range []struct {
		tau  float32
		base int
		want []uint32
	}{
		{1, 0, []uint32{1, 2, 3, 5, 7}},
		{1, 100, []uint32{101, 102, 103, 105, 107}},
		{2.5, 0, []uint32{5, 7}},
		{math.SmallestNonzeroFloat32, 0, []uint32{0, 1, 2, 3, 5, 7}},
	} {
		prefix := []byte{9, 9, 9}
		out := AppendAtLeast(slices.Clone(prefix), g, tc.base, tc.tau)
		if !slices.Equal(out[:3], prefix) || (len(out)-3)%4 != 0 {
			t.Fatalf("tau %g: the prefix was not kept or the indices are not whole: %v", tc.tau, out)
		}
		var got []uint32
		for b := out[3:]; len(b) > 0; b = b[4:] {
			got = append(got, binary.LittleEndian.Uint32(b))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("tau %g base %d: indices %v, want %v", tc.tau, tc.base, got, tc.want)
		}
	}
}
