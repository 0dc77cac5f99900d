package nets

import "math"

// Element-wise kernels of the LSTM cell and the cross-entropy: AVX-512 assembly where the CPU has
// it (16 lanes, within a few float32 ulps of the Go loops), else the Go loops.

// maxF32 returns the largest element of x (-Inf for an empty x). NaNs may or may not be skipped.
func maxF32(x []float32) float32 {
	if vecAVX512 && len(x) > 0 {
		return maxF32AVX512(&x[0], len(x))
	}
	mx := float32(math.Inf(-1))
	for _, v := range x {
		if v > mx {
			mx = v
		}
	}
	return mx
}

// expShiftSumVec is expShiftSum (dst[j] = exp(src[j] - mx), returning the sum) on the vector
// kernel when there is one.
func expShiftSumVec(dst, src []float32, mx float32) float64 {
	if vecAVX512 && len(src) > 0 {
		dst = dst[:len(src)]
		return expShiftSumAVX512(&dst[0], &src[0], len(src), mx)
	}
	return expShiftSum(dst, src, mx)
}

// scaleF32 multiplies x by s in place.
func scaleF32(x []float32, s float32) {
	if vecAVX512 && len(x) > 0 {
		scaleF32AVX512(&x[0], len(x), s)
		return
	}
	for j := range x {
		x[j] *= s
	}
}

// sigmoidVec sets dst[j] = σ(src[j]); dst may be src.
func sigmoidVec(dst, src []float32) {
	dst = dst[:len(src)]
	if vecAVX512 && len(src) > 0 {
		sigmoidAVX512(&dst[0], &src[0], len(src))
		return
	}
	for j, x := range src {
		dst[j] = sigmoid(x)
	}
}

// tanhVec sets dst[j] = tanh(src[j]); dst may be src.
func tanhVec(dst, src []float32) {
	dst = dst[:len(src)]
	if vecAVX512 && len(src) > 0 {
		tanhAVX512(&dst[0], &src[0], len(src))
		return
	}
	for j, x := range src {
		dst[j] = tanh32(x)
	}
}

// addF32 does dst[j] += src[j].
func addF32(dst, src []float32) {
	dst = dst[:len(src)]
	if vecAVX512 && len(src) > 0 {
		addF32AVX512(&dst[0], &src[0], len(src))
		return
	}
	accumulate(dst, src)
}
