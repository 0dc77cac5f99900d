//go:build !amd64 || purego

package kernels

// sgemmKernels lists the kernels this CPU can run: none outside amd64, where Sgemm keeps its
// pure-Go paths.
func sgemmKernels() []*sgemmKernel { return nil }

// transpose8Blocks leaves all of transpose8 to its Go loop.
func transpose8Blocks(dst []float32, ldd int, src []float32, lds, kk int) int { return 0 }
