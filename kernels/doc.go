// Package kernels owns the compute kernels of the models' matrix products and convolutions,
// on plain float32 slices: it knows nothing of Gorgonia, graphs or models, so that the kernels
// can be tested and timed on their own (BenchmarkGemm, BenchmarkConvLayer) and package nets
// keeps only the models and the Gorgonia ops that call them.
//
// Its API is two entry points:
//
//   - Sgemm, a BLAS-style single-precision matrix product. It runs register-blocked micro-kernels
//     in Go assembly (AVX-512, or AVX2 with FMA, chosen once at start-up for this CPU), an
//     external BLAS where the build has one (the openblas build tag, a cgo binding in
//     kernels/internal/openblas), and pure-Go row kernels on Gonum's BLAS elsewhere.
//     GEMMKernel names the choice, for the provenance of results; FallbackBLAS is the BLAS
//     behind the pure-Go path.
//   - Conv, a 2-D convolution of fixed geometry (NCHW images, square kernel) with its forward
//     pass, input gradient and filter gradient: GEMMs over column matrices (im2col), or Winograd's
//     F(2×2, 3×3) for stride-1 3×3 convolutions with enough channels, its plane transforms in
//     AVX-512 assembly where the CPU has it.
//
// The default build is pure Go (no cgo); the purego build tag also leaves out the assembly.
// Work is split across GOMAXPROCS goroutines (package internal/parallel); a Conv sums its
// partial results in a fixed order, so that they do not depend on the number of cores.
package kernels
