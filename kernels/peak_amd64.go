//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

//go:noescape
func fmaLoopAVX512(n int) float32

//go:noescape
func fmaLoopAVX2(n int) float32

// fmaLoop returns the widest register-only FMA loop this CPU runs, its name and the
// floating-point operations one of its iterations does (12 FMAs of lanes floats, 2 each).
func fmaLoop() (loop func(n int) float32, name string, flopsPerIter float64) {
	switch {
	case cpu.X86.HasAVX512F:
		return fmaLoopAVX512, "avx512", 12 * 16 * 2
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return fmaLoopAVX2, "avx2", 12 * 8 * 2
	}
	return fmaLoopGo, "go", 12 * 2
}
