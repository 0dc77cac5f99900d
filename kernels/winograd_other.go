//go:build !amd64 || purego

package kernels

// Without the vector transforms of winograd_amd64.s, the scalar ones in winograd.go run.

var winoVector = false

func winoInput16(v *float32, ld int, r *float32, pw int, n int) {
	panic("kernels: no vector transforms")
}

func winoOutputGrad16(dm *float32, ld int, y0, y1 *float32, n int) {
	panic("kernels: no vector transforms")
}

func winoOutput16(y0, y1 *float32, m *float32, ld int, n int, bias float32) {
	panic("kernels: no vector transforms")
}

func winoInputGrad16(r *float32, pw int, dv *float32, ld int, n int) {
	panic("kernels: no vector transforms")
}
