//go:build openblas

// Package openblas calls OpenBLAS's cblas_sgemm for the -tags openblas build of package kernels.
//
// It is a package of its own because it uses cgo, and Go does not build a package that uses cgo
// and also holds Go assembly files, as kernels does (its GEMM kernels). Every file carries the
// openblas build tag, so the default build neither compiles it nor needs a C toolchain.
//
// Linking needs Debian's libopenblas-dev (or any libopenblas with the LP64 CBLAS interface).
package openblas

// openblas_set_num_threads and openblas_get_num_threads are declared here as well as in
// OpenBLAS's cblas.h because the <cblas.h> found first may be another implementation's (Debian
// chooses it with update-alternatives) that lacks them; identical declarations may repeat in C.

/*
#cgo LDFLAGS: -lopenblas
#include <cblas.h>

void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
*/
import "C"

import (
	"fmt"
	"math"
	"os"
	"sync"
	"unsafe"
)

// once limits OpenBLAS to one thread, once, before its first product.
var once sync.Once

// limitThreads sets OpenBLAS to a single thread unless OPENBLAS_NUM_THREADS is set (OpenBLAS
// reads that variable itself when it loads, so an explicit choice is left alone). Its default is
// a thread per core, but here the cores are already taken: Go runs the model's goroutines on every
// core (the convolutions and large products split their work across them), and several worker
// processes share one machine, so OpenBLAS's own threads would only compete with them and spin.
func limitThreads() {
	if _, set := os.LookupEnv("OPENBLAS_NUM_THREADS"); !set {
		C.openblas_set_num_threads(1)
	}
}

// Threads reports how many threads OpenBLAS uses, after the one-thread default has been applied.
func Threads() int {
	once.Do(limitThreads)
	return int(C.openblas_get_num_threads())
}

// Sgemm computes C = alpha·op(A)·op(B) + beta·C on row-major matrices with cblas_sgemm, where op
// transposes when tA or tB is set; C is m×n and the inner dimension is k, as in BLAS Sgemm.
//
// C reads and writes memory without bounds checks, so the slices are checked against the shapes
// and leading dimensions first and a mismatch panics, as Gonum's Sgemm does. Empty products
// never reach C: they would need pointers to elements of empty slices.
func Sgemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	once.Do(limitThreads)
	ar, ac := m, k // A as stored: op(A) is m×k
	if tA {
		ar, ac = k, m
	}
	br, bc := k, n
	if tB {
		br, bc = n, k
	}
	checkLD("a", ar, ac, lda)
	checkLD("b", br, bc, ldb)
	checkLD("c", m, n, ldc)
	if m == 0 || n == 0 {
		return // like Gonum's Sgemm, before looking at the slices' lengths
	}
	checkLen("a", ar, ac, a, lda)
	checkLen("b", br, bc, b, ldb)
	checkLen("c", m, n, c, ldc)
	if k == 0 {
		// alpha·op(A)·op(B) is zero: only C's scaling remains, and A and B may be empty.
		scale(m, n, beta, c, ldc)
		return
	}
	ta, tb := uint32(C.CblasNoTrans), uint32(C.CblasNoTrans) // cgo gives C enums as uint32
	if tA {
		ta = C.CblasTrans
	}
	if tB {
		tb = C.CblasTrans
	}
	C.cblas_sgemm(C.CblasRowMajor, ta, tb, C.int(m), C.int(n), C.int(k),
		C.float(alpha), (*C.float)(unsafe.Pointer(&a[0])), C.int(lda),
		(*C.float)(unsafe.Pointer(&b[0])), C.int(ldb),
		C.float(beta), (*C.float)(unsafe.Pointer(&c[0])), C.int(ldc))
}

// checkLD panics unless a rows×cols row-major matrix may have leading dimension ld and its sizes
// fit the 32-bit integers of OpenBLAS's LP64 interface.
func checkLD(name string, rows, cols, ld int) {
	switch {
	case rows < 0 || cols < 0:
		panic(fmt.Sprintf("openblas: sgemm: %s is %d×%d", name, rows, cols))
	case ld < max(1, cols):
		panic(fmt.Sprintf("openblas: sgemm: leading dimension of %s is %d, below its %d columns", name, ld, cols))
	case ld > math.MaxInt32 || rows > math.MaxInt32:
		panic(fmt.Sprintf("openblas: sgemm: %s (%d rows, leading dimension %d) is too large for OpenBLAS", name, rows, ld))
	}
}

// checkLen panics unless v is long enough for a rows×cols row-major matrix with leading
// dimension ld. An empty matrix needs no elements.
func checkLen(name string, rows, cols int, v []float32, ld int) {
	if rows > 0 && cols > 0 && len(v) < (rows-1)*ld+cols {
		panic(fmt.Sprintf("openblas: sgemm: %s has %d elements, a %d×%d matrix with leading dimension %d needs %d", name, len(v), rows, cols, ld, (rows-1)*ld+cols))
	}
}

// scale sets C = beta·C on an m×n matrix. beta == 0 clears C, as BLAS does, so that NaNs already
// in C do not survive.
func scale(m, n int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		switch beta {
		case 0:
			clear(row)
		case 1:
		default:
			for j := range row {
				row[j] *= beta
			}
		}
	}
}
