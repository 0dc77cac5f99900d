//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

// The vector plane transforms of winograd_amd64.s; see there for what they compute.

//go:noescape
func winoInput16(v *float32, ld int, r *float32, pw int, n int)

//go:noescape
func winoOutputGrad16(dm *float32, ld int, y0, y1 *float32, n int)

//go:noescape
func winoOutput16(y0, y1 *float32, m *float32, ld int, n int, bias float32)

// winoVector enables the vector transforms; tests turn it off to run the scalar ones.
var winoVector = cpu.X86.HasAVX512F

//go:noescape
func winoInputGrad16(r *float32, pw int, dv *float32, ld int, n int)
