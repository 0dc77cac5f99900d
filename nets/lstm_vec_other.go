//go:build !amd64 || purego

package nets

// Without the assembly kernels the element-wise wrappers of lstm_vec.go run their Go loops.
const vecAVX512 = false

func maxF32AVX512(*float32, int) float32                         { panic("no AVX-512 kernels") }
func expShiftSumAVX512(_, _ *float32, _ int, _ float32) float64  { panic("no AVX-512 kernels") }
func scaleF32AVX512(*float32, int, float32)                      { panic("no AVX-512 kernels") }
func sigmoidAVX512(_, _ *float32, _ int)                         { panic("no AVX-512 kernels") }
func tanhAVX512(_, _ *float32, _ int)                            { panic("no AVX-512 kernels") }
func addF32AVX512(_, _ *float32, _ int)                          { panic("no AVX-512 kernels") }
func lstmCellBackwardAVX512(_, _, _, _, _, _, _ *float32, _ int) { panic("no AVX-512 kernels") }
