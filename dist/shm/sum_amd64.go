//go:build amd64 && !purego && !mpi

package shm

import "golang.org/x/sys/cpu"

// The AVX loops of sum_amd64.s, over the first n floats, n a multiple of 32.

//go:noescape
func sumVec2(dst, a, b *float32, n int)

//go:noescape
func sumVec3(dst, a, b, c *float32, n int)

//go:noescape
func sumVec4(dst, a, b, c, d *float32, n int)

var hasSumVec = cpu.X86.HasAVX

// vecLen is how many leading floats of an n-float sum the vector loops take.
func vecLen(n int) int {
	if !hasSumVec {
		return 0
	}
	return n &^ 31
}
