//go:build amd64 && !purego

package nets

import "golang.org/x/sys/cpu"

// The vector loops of bn_amd64.s; see there for what they compute.

//go:noescape
func sumVec(x *float32, n int) float32

//go:noescape
func sumSqDevVec(x *float32, n int, m float32) float32

//go:noescape
func sumDyDevVec(out, dy, y, x *float32, n int, m float32, mode int) (sdy, sdyx float32)

//go:noescape
func affineVec(y, x *float32, n int, a, b float32, relu bool)

//go:noescape
func bnGradVec(dx, dy, x *float32, n int, m, is, a, mdy, mdyx float32)

// bnVector enables the vector loops (BatchNorm's and the ReLU's); tests turn it off to run the
// scalar ones.
var bnVector = cpu.X86.HasAVX512F

// The vector loops of relu_amd64.s, under bnVector too.

//go:noescape
func reluVec(y, x *float32, n int)

//go:noescape
func addReLUVec(y, a, b *float32, n int)

//go:noescape
func reluGradVec(dx, y, dy *float32, n int)
