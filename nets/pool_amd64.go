//go:build amd64 && !purego

package nets

import "golang.org/x/sys/cpu"

// The vector rows of pool_amd64.s; see there for what they compute.

//go:noescape
func maxPoolRow16(y *float32, arg *uint8, r0, r1 *float32, n int)

//go:noescape
func maxPoolGradRow16(r0, r1 *float32, dy *float32, arg *uint8, n int)

// poolVector enables the vector rows; tests turn it off to run the scalar ones.
var poolVector = cpu.X86.HasAVX512F
