//go:build !amd64 || purego || mpi

// The mpi build sums in Go: Go refuses Go assembly in a package that uses cgo.

package shm

func sumVec2(dst, a, b *float32, n int)       { panic("unreachable") }
func sumVec3(dst, a, b, c *float32, n int)    { panic("unreachable") }
func sumVec4(dst, a, b, c, d *float32, n int) { panic("unreachable") }

// vecLen is how many leading floats of an n-float sum the vector loops take: none here.
func vecLen(n int) int { return 0 }
