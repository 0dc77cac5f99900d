// Package wire holds the byte views and sums that the transports share: float32 and
// int32 slices as little-endian bytes, and the element-wise sums whose operand order
// the bit-identity guarantee depends on.
package wire

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// NativeLE reports whether this machine stores numbers little-endian, the wire order:
// then float32 and int32 slices go on the wire as they are, without a copy.
var NativeLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// SumInto sets dst[i] = a[i] + b[i]; dst may alias a or b. The operand order is part of
// the bit-identity guarantee: float addition is commutative, but the payload of a NaN
// sum depends on which operand came first on some machines.
func SumInto(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	i := 0
	for ; i+4 <= len(dst); i += 4 {
		d, x, y := dst[i:i+4:i+4], a[i:i+4:i+4], b[i:i+4:i+4]
		d[0] = x[0] + y[0]
		d[1] = x[1] + y[1]
		d[2] = x[2] + y[2]
		d[3] = x[3] + y[3]
	}
	for ; i < len(dst); i++ {
		dst[i] = a[i] + b[i]
	}
}

// DivideBy sets buf[i] /= d.
func DivideBy(buf []float32, d float32) {
	for i := range buf {
		buf[i] /= d
	}
}

// F32Bytes returns f as little-endian bytes: f's own memory when le, else a copy.
func F32Bytes(f []float32, le bool) []byte {
	if len(f) == 0 {
		return nil
	}
	if le {
		return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(f)*4)
	}
	b := make([]byte, len(f)*4)
	for i, v := range f {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// BytesF32 returns little-endian bytes b (len a multiple of 4) as float32s: b's own
// memory when le and b is aligned, else a copy.
func BytesF32(b []byte, le bool) []float32 {
	n := len(b) / 4
	if n == 0 {
		return nil
	}
	if le && uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
	}
	f := make([]float32, n)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return f
}

// I32Bytes and BytesI32 are the int32 counterparts of F32Bytes and BytesF32.
func I32Bytes(v []int32, le bool) []byte {
	if len(v) == 0 {
		return nil
	}
	if le {
		return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*4)
	}
	b := make([]byte, len(v)*4)
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func BytesI32(b []byte, le bool) []int32 {
	n := len(b) / 4
	if n == 0 {
		return nil
	}
	if le && uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), n)
	}
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
