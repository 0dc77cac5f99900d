//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

// The micro-kernels of sgemm_amd64.s; see there for what they compute and how.

//go:noescape
func sgemmKernel6x16(kc int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)

//go:noescape
func sgemmKernel8x32(kc int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)

var (
	kernelAVX2   = &sgemmKernel{name: "avx2", mr: 6, nr: 16, fn: sgemmKernel6x16}
	kernelAVX512 = &sgemmKernel{name: "avx512", mr: 8, nr: 32, fn: sgemmKernel8x32}
)

// sgemmKernels lists the kernels this CPU can run, the preferred one first. The AVX-512 kernel
// needs only the foundation set (cpu reports it only when the OS saves the ZMM registers). It is
// preferred because on the development machine (Zen 5, two 512-bit FMA pipes) it runs at about
// twice the AVX2 kernel's rate (BenchmarkGemm); where 512-bit FMAs are split into two 256-bit
// halves (Zen 4, Xeons with one 512-bit FMA unit) it should merely match it.
func sgemmKernels() []*sgemmKernel {
	var ks []*sgemmKernel
	if cpu.X86.HasAVX512F {
		ks = append(ks, kernelAVX512)
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, kernelAVX2)
	}
	return ks
}

//go:noescape
func transpose8x8(dst *float32, ldd int, src *float32, lds int, blocks int)

// hasAVX2 enables the assembly transposes; every kernel needs AVX2, so they run whenever sgemm
// does.
var hasAVX2 = cpu.X86.HasAVX2

// transpose8Blocks does the first kk/8 eight-step blocks of transpose8 in assembly and returns
// the number of steps done. The caller has checked the bounds.
func transpose8Blocks(dst []float32, ldd int, src []float32, lds, kk int) int {
	if !hasAVX2 || kk < 8 {
		return 0
	}
	transpose8x8(&dst[0], ldd, &src[0], lds, kk/8)
	return kk &^ 7
}
