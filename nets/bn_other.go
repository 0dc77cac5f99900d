//go:build !amd64 || purego

package nets

// Without the vector loops of bn_amd64.s, the scalar ones in op_bn.go run.

var bnVector = false

func sumVec(x *float32, n int) float32 { panic("nets: no vector loops") }

func sumSqDevVec(x *float32, n int, m float32) float32 { panic("nets: no vector loops") }

func sumDyDevVec(out, dy, y, x *float32, n int, m float32, mode int) (sdy, sdyx float32) {
	panic("nets: no vector loops")
}

func affineVec(y, x *float32, n int, a, b float32, relu bool) { panic("nets: no vector loops") }

func bnGradVec(dx, dy, x *float32, n int, m, is, a, mdy, mdyx float32) {
	panic("nets: no vector loops")
}

func reluVec(y, x *float32, n int) { panic("nets: no vector loops") }

func addReLUVec(y, a, b *float32, n int) { panic("nets: no vector loops") }

func reluGradVec(dx, y, dy *float32, n int) { panic("nets: no vector loops") }
