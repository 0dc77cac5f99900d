//go:build !amd64 || purego

package kernels

// fmaLoop returns the portable loop: without assembly, the peak it measures is the
// compiler's scalar rate, not the machine's.
func fmaLoop() (loop func(n int) float32, name string, flopsPerIter float64) {
	return fmaLoopGo, "go", 12 * 2
}
