//go:build amd64 && !purego

package nets

import "golang.org/x/sys/cpu"

// The element-wise kernels of lstm_vec_amd64.s, used when the CPU has AVX-512F. Each takes raw
// pointers and a length; the wrappers in lstm_vec.go check the lengths.

// vecAVX512 enables the AVX-512 element-wise kernels.
var vecAVX512 = cpu.X86.HasAVX512F

//go:noescape
func maxF32AVX512(x *float32, n int) float32

//go:noescape
func expShiftSumAVX512(dst, src *float32, n int, mx float32) float64

//go:noescape
func scaleF32AVX512(x *float32, n int, s float32)

//go:noescape
func sigmoidAVX512(dst, src *float32, n int)

//go:noescape
func tanhAVX512(dst, src *float32, n int)

//go:noescape
func addF32AVX512(dst, src *float32, n int)

//go:noescape
func lstmCellBackwardAVX512(gates, d, tc, cp, dh, dn, dc *float32, h int)
