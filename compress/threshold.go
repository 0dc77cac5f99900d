package compress

import (
	"encoding/binary"
	"math"
)

// ThresholdKind is the Timing kind of a threshold scan (AppendAtLeast), as the simulator's
// selection model knows it.
const ThresholdKind = "threshold"

// AppendAtLeast is the threshold selector, the selection of ExDyna (and of any pipeline
// whose threshold is kept rather than found): it appends to dst the index, plus base, of
// every element of g whose magnitude reaches tau, as little-endian uint32 in ascending
// order, and returns the extended buffer. Magnitudes compare as integers: the bits of a
// non-negative float32 order like its value, so clearing the sign bit gives a key. tau must
// be positive; a NaN or ±Inf element has a key above every threshold and is selected.
func AppendAtLeast(dst []byte, g []float32, base int, tau float32) []byte {
	key := math.Float32bits(tau)
	for i, a := range g {
		if magKey(a) >= key {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(base+i))
		}
	}
	return dst
}
