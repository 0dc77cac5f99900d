//go:build !amd64 || purego

package nets

// Without the vector rows of pool_amd64.s, the scalar loops in op_pool.go run.

var poolVector = false

func maxPoolRow16(y *float32, arg *uint8, r0, r1 *float32, n int) { panic("nets: no vector rows") }

func maxPoolGradRow16(r0, r1 *float32, dy *float32, arg *uint8, n int) {
	panic("nets: no vector rows")
}
