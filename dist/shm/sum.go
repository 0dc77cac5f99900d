package shm

import "github.com/ssfusion/ssfusion/dist/internal/wire"

// sumRanks sets dst to the sum of srcs in their order, (((s0 + s1) + s2) + s3) + ...,
// the same bits as chaining wire.SumInto over them, in fewer passes: each pass folds up to
// three more operands into dst, so dst is read and written once per three of them.
// srcs holds at least one operand, each at least as long as dst. On amd64 the bulk runs
// in AVX loops; every rank of a job runs the same code on the same machine, so a sum is
// the same wherever it is computed.
func sumRanks(dst []float32, srcs [][]float32) {
	switch len(srcs) {
	case 1:
		copy(dst, srcs[0])
		return
	case 2:
		sum2(dst, srcs[0], srcs[1])
		return
	case 3:
		sum3(dst, srcs[0], srcs[1], srcs[2])
		return
	}
	sum4(dst, srcs[0], srcs[1], srcs[2], srcs[3])
	rest := srcs[4:]
	for ; len(rest) >= 3; rest = rest[3:] {
		sum4(dst, dst, rest[0], rest[1], rest[2])
	}
	switch len(rest) {
	case 1:
		sum2(dst, dst, rest[0])
	case 2:
		sum3(dst, dst, rest[0], rest[1])
	}
}

// sum2 sets dst[i] = a[i] + b[i]; dst may alias a.
func sum2(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	i := vecLen(len(dst))
	if i > 0 {
		sumVec2(&dst[0], &a[0], &b[0], i)
	}
	wire.SumInto(dst[i:], a[i:], b[i:])
}

// sum3 sets dst[i] = (a[i] + b[i]) + c[i]; dst may alias a.
func sum3(dst, a, b, c []float32) {
	a, b, c = a[:len(dst)], b[:len(dst)], c[:len(dst)]
	i := vecLen(len(dst))
	if i > 0 {
		sumVec3(&dst[0], &a[0], &b[0], &c[0], i)
	}
	for ; i+4 <= len(dst); i += 4 {
		d, x, y, z := dst[i:i+4:i+4], a[i:i+4:i+4], b[i:i+4:i+4], c[i:i+4:i+4]
		d[0] = (x[0] + y[0]) + z[0]
		d[1] = (x[1] + y[1]) + z[1]
		d[2] = (x[2] + y[2]) + z[2]
		d[3] = (x[3] + y[3]) + z[3]
	}
	for ; i < len(dst); i++ {
		dst[i] = (a[i] + b[i]) + c[i]
	}
}

// sum4 sets dst[i] = ((a[i] + b[i]) + c[i]) + d[i]; dst may alias a.
func sum4(dst, a, b, c, d []float32) {
	a, b, c, d = a[:len(dst)], b[:len(dst)], c[:len(dst)], d[:len(dst)]
	i := vecLen(len(dst))
	if i > 0 {
		sumVec4(&dst[0], &a[0], &b[0], &c[0], &d[0], i)
	}
	for ; i+4 <= len(dst); i += 4 {
		o, w, x, y, z := dst[i:i+4:i+4], a[i:i+4:i+4], b[i:i+4:i+4], c[i:i+4:i+4], d[i:i+4:i+4]
		o[0] = ((w[0] + x[0]) + y[0]) + z[0]
		o[1] = ((w[1] + x[1]) + y[1]) + z[1]
		o[2] = ((w[2] + x[2]) + y[2]) + z[2]
		o[3] = ((w[3] + x[3]) + y[3]) + z[3]
	}
	for ; i < len(dst); i++ {
		dst[i] = ((a[i] + b[i]) + c[i]) + d[i]
	}
}
