package kernels

import "github.com/ssfusion/ssfusion/internal/parallel"

// This file computes stride-1 3×3 convolutions with Winograd's minimal filtering algorithm
// F(2×2, 3×3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks"): every 2×2 tile
// of output is Aᵀ[(G·g·Gᵀ) ⊙ (Bᵀ·d·B)]A, where d is the 4×4 tile of input it reads and g a
// 3×3 filter. Summed over input channels, the element-wise products become 16 independent GEMMs,
// one per element ξ of the 4×4 transformed tile, of cout×cin transformed filters by cin×tiles
// transformed inputs: 16 multiply-adds per tile, channel pair and output tile, where im2col's GEMM
// makes 36. The transforms are additions (and halvings for the filters), cheap next to the GEMMs
// once there are a few dozen channels.
//
// The gradients are those of the same computation, so they need no flipped filters and their
// GEMMs shrink alike: dM = A·dy·Aᵀ per output tile, then dV = Uᵀ·dM (the input gradient, which
// Bᵀ-transposed tiles add back into the image) and dU = dM·Vᵀ summed over tiles (the filter
// gradient, Gᵀ·dU·G per filter). F(2×2, 3×3)'s transforms have entries 0, ±1 and ±½, so in
// float32 its results differ from the direct convolution's by a few units of rounding only.
//
// Transformed tensors are stored channel-major, [channel][ξ][tile]: the transforms then read and
// write one contiguous block per channel, and GEMM ξ sees the channels as rows 16·tiles (plus
// winoSkew) apart.
// Transformed filters are stored [ξ][cout][cin], the GEMMs' row-major A.

// winoMinChannels is the least number of input and output channels for which Winograd pays:
// with fewer, the GEMMs are too short for their savings to cover the transforms (BenchmarkConvLayer:
// even at 16 channels, 1.2-1.7× faster from 32 up).
const winoMinChannels = 32

// winoMinTiles is the least number of tiles per GEMM: the images of a batch whose feature maps
// have fewer tiles go side by side, as in forEachGroup.
const winoMinTiles = 128

// winoGeom is the tiling of a Winograd convolution.
type winoGeom struct {
	th, tw int // tiles down and across an image's output
	tiles  int // th·tw
	ph, pw int // the padded input plane the tiles read: 2·th+2 by 2·tw+2
	group  int // images per GEMM
	us     int // the distance between the transformed filters of consecutive ξ: cout·cin + winoSkew
}

// winoSkew is the padding (in floats, one cache line) added to the distances between the GEMMs'
// operands and between the rows of their transformed tiles. Without it those distances are
// multiples of large powers of two, so that the 16 streams of a transform, or the rows of a GEMM
// panel, all fall into the same few cache sets and evict each other: measured 2× slower.
const winoSkew = 16

// useWinograd reports whether g runs with Winograd, and sets up its tiling if so: where Winograd
// computes the convolution and, unless always is set, there are channels enough for it to pay.
func (g *convGeom) useWinograd(always bool) bool {
	if g.k != 3 || g.stride != 1 || g.pad > 2 {
		return false
	}
	if !always && (g.cin < winoMinChannels || g.cout < winoMinChannels) {
		return false
	}
	w := winoGeom{th: (g.oh + 1) / 2, tw: (g.ow + 1) / 2}
	w.tiles = w.th * w.tw
	w.ph, w.pw = 2*w.th+2, 2*w.tw+2
	w.group = max(1, (winoMinTiles+w.tiles-1)/w.tiles)
	w.us = g.cout*g.cin + winoSkew
	g.wino = &w
	return true
}

// winoFilters returns u, grown to [16][cout][cin] if need be, set to the transformed filters
// G·g·Gᵀ of w (cout, cin, 3, 3).
func (g *convGeom) winoFilters(u, w []float32) []float32 {
	us := g.wino.us
	if len(u) != 16*us {
		u = make([]float32, 16*us)
	}
	parallel.For(g.cout*g.cin, 1024, func(_, lo, hi int) { winoFilterRange(u, w, us, lo, hi) })
	return u
}

// winoFilterRange transforms filters [lo, hi), n apart in u.
func winoFilterRange(u, w []float32, n, lo, hi int) {
	u = u[:16*n]
	for f := lo; f < hi; f++ {
		s := w[f*9 : f*9+9 : f*9+9]
		// G·g: rows g0, (g0+g1+g2)/2, (g0-g1+g2)/2, g2 of the filter's rows; then ·Gᵀ, the same
		// combinations of each row's elements.
		h0, h1, h2 := 0.5*(s[0]+s[6]), 0.5*(s[1]+s[7]), 0.5*(s[2]+s[8])
		e0, e1, e2 := 0.5*s[3], 0.5*s[4], 0.5*s[5]
		winoFilterRow(u, n, f, s[0], s[1], s[2])
		winoFilterRow(u, n, 4*n+f, h0+e0, h1+e1, h2+e2)
		winoFilterRow(u, n, 8*n+f, h0-e0, h1-e1, h2-e2)
		winoFilterRow(u, n, 12*n+f, s[6], s[7], s[8])
	}
}

// winoFilterRow writes (a, (a+b+c)/2, (a-b+c)/2, c) to u at i, i+n, i+2n and i+3n.
func winoFilterRow(u []float32, n, i int, a, b, c float32) {
	h, e := 0.5*(a+c), 0.5*b
	u[i] = a
	u[i+n] = h + e
	u[i+2*n] = h - e
	u[i+3*n] = c
}

// winoFilterGrad sets dw (cout, cin, 3, 3) to Gᵀ·dU·G of the transformed filter gradient du
// ([16][cout][cin]).
func (g *convGeom) winoFilterGrad(dw, du []float32) {
	us := g.wino.us
	parallel.For(g.cout*g.cin, 1024, func(_, lo, hi int) { winoFilterGradRange(dw, du, us, lo, hi) })
}

// winoFilterGradRange is winoFilterGrad for filters [lo, hi), n apart in du.
func winoFilterGradRange(dw, du []float32, n, lo, hi int) {
	du = du[:16*n]
	for f := lo; f < hi; f++ {
		// dU·G: Gᵀ takes a 4-vector v to (v0 + (v1+v2)/2, (v1-v2)/2, (v1+v2)/2 + v3); along
		// the rows, then down the columns.
		a0, a1, a2 := winoFilterGradRow(du, n, f)
		b0, b1, b2 := winoFilterGradRow(du, n, 4*n+f)
		c0, c1, c2 := winoFilterGradRow(du, n, 8*n+f)
		d0, d1, d2 := winoFilterGradRow(du, n, 12*n+f)
		d := dw[f*9 : f*9+9 : f*9+9]
		h0, h1, h2 := 0.5*(b0+c0), 0.5*(b1+c1), 0.5*(b2+c2)
		d[0], d[1], d[2] = a0+h0, a1+h1, a2+h2
		d[3], d[4], d[5] = 0.5*(b0-c0), 0.5*(b1-c1), 0.5*(b2-c2)
		d[6], d[7], d[8] = h0+d0, h1+d1, h2+d2
	}
}

// winoFilterGradRow returns Gᵀ·(du[i], du[i+n], du[i+2n], du[i+3n]).
func winoFilterGradRow(du []float32, n, i int) (a, b, c float32) {
	v0, v1, v2, v3 := du[i], du[i+n], du[i+2*n], du[i+3*n]
	h := 0.5 * (v1 + v2)
	return v0 + h, 0.5 * (v1 - v2), h + v3
}

// The plane transforms below are unrolled by hand into scalars: Go keeps neither small arrays nor
// their loops in registers, and that ran them at a third of this speed.

// winoInput writes the transformed input tiles Bᵀ·d·B of channel plane x (h×w) into v, the
// channel's [16][ld] block, at tiles t0 onwards; pad is scratch for the padded plane.
func (g *convGeom) winoInput(v []float32, ld, t0 int, x, pad []float32) {
	wg := g.wino
	pw := wg.pw
	pad = pad[: wg.ph*pw : wg.ph*pw+winoSlack]
	// The plane with its padding: tiles then read without bounds tests.
	clear(pad[:g.pad*pw])
	for r := 0; r < g.h; r++ {
		row := pad[(r+g.pad)*pw : (r+g.pad+1)*pw]
		clear(row[:g.pad])
		copy(row[g.pad:], x[r*g.w:(r+1)*g.w])
		clear(row[g.pad+g.w:])
	}
	clear(pad[(g.h+g.pad)*pw:])
	v = v[:15*ld+t0+wg.tiles]
	if winoVector {
		g.winoInputVector(v, ld, t0, pad)
		return
	}
	t := t0
	for ty := 0; ty < wg.th; ty++ {
		r0 := pad[2*ty*pw:][:pw]
		r1 := pad[(2*ty+1)*pw:][:pw]
		r2 := pad[(2*ty+2)*pw:][:pw]
		r3 := pad[(2*ty+3)*pw:][:pw]
		for c := 0; c+4 <= pw; c, t = c+2, t+1 {
			a, b, e, d := r0[c:c+4:c+4], r1[c:c+4:c+4], r2[c:c+4:c+4], r3[c:c+4:c+4]
			// Bᵀ·d down the columns: rows d0-d2, d1+d2, d2-d1, d1-d3; then ·B along the rows,
			// the same combinations of each row's elements.
			p0, p1, p2, p3 := a[0]-e[0], a[1]-e[1], a[2]-e[2], a[3]-e[3]
			v[t] = p0 - p2
			v[ld+t] = p1 + p2
			v[2*ld+t] = p2 - p1
			v[3*ld+t] = p1 - p3
			p0, p1, p2, p3 = b[0]+e[0], b[1]+e[1], b[2]+e[2], b[3]+e[3]
			v[4*ld+t] = p0 - p2
			v[5*ld+t] = p1 + p2
			v[6*ld+t] = p2 - p1
			v[7*ld+t] = p1 - p3
			p0, p1, p2, p3 = e[0]-b[0], e[1]-b[1], e[2]-b[2], e[3]-b[3]
			v[8*ld+t] = p0 - p2
			v[9*ld+t] = p1 + p2
			v[10*ld+t] = p2 - p1
			v[11*ld+t] = p1 - p3
			p0, p1, p2, p3 = b[0]-d[0], b[1]-d[1], b[2]-d[2], b[3]-d[3]
			v[12*ld+t] = p0 - p2
			v[13*ld+t] = p1 + p2
			v[14*ld+t] = p2 - p1
			v[15*ld+t] = p1 - p3
		}
	}
}

// winoSlack is the room past the end of a padded plane that winoInput16, which reads 34 floats of
// every row, may read into.
const winoSlack = 32

// winoInputVector is winoInput's loop over the tiles with winoInput16, on a padded plane followed
// by winoSlack floats.
func (g *convGeom) winoInputVector(v []float32, ld, t0 int, pad []float32) {
	wg := g.wino
	pw := wg.pw
	pad = pad[:cap(pad)]
	for ty := 0; ty < wg.th; ty++ {
		for tx := 0; tx < wg.tw; tx += 16 {
			n, t, r := min(16, wg.tw-tx), t0+ty*wg.tw+tx, 2*ty*pw+2*tx
			_, _ = v[15*ld+t+n-1], pad[r+3*pw+33]
			winoInput16(&v[t], ld, &pad[r], pw, n)
		}
	}
}

// winoOutput sets the channel plane y (oh×ow) to Aᵀ·m·A of the tiles t0 onwards of m, the
// channel's [16][ld] block, plus bias.
func (g *convGeom) winoOutput(y []float32, m []float32, ld, t0 int, bias float32) {
	wg := g.wino
	m = m[:15*ld+t0+wg.tiles]
	if winoVector && g.oh%2 == 0 && g.ow%2 == 0 {
		for ty := 0; ty < wg.th; ty++ {
			y0 := y[2*ty*g.ow : (2*ty+2)*g.ow]
			for tx := 0; tx < wg.tw; tx += 16 {
				n, t := min(16, wg.tw-tx), t0+ty*wg.tw+tx
				_, _ = m[15*ld+t+n-1], y0[g.ow+2*(tx+n)-1]
				winoOutput16(&y0[2*tx], &y0[g.ow+2*tx], &m[t], ld, n, bias)
			}
		}
		return
	}
	t := t0
	for ty := 0; ty < wg.th; ty++ {
		y0 := y[2*ty*g.ow:][:g.ow]
		y1 := y0 // the second row, or the first again when the tile sticks out at the bottom
		if 2*ty+1 < g.oh {
			y1 = y[(2*ty+1)*g.ow:][:g.ow]
		}
		for c := 0; c < g.ow; c, t = c+2, t+1 {
			// Aᵀ·m down the columns: rows m0+m1+m2 and m1-m2-m3; then ·A along the rows.
			m4, m5, m6, m7 := m[4*ld+t], m[5*ld+t], m[6*ld+t], m[7*ld+t]
			m8, m9, m10, m11 := m[8*ld+t], m[9*ld+t], m[10*ld+t], m[11*ld+t]
			s0 := m[t] + m4 + m8
			s1 := m[ld+t] + m5 + m9
			s2 := m[2*ld+t] + m6 + m10
			s3 := m[3*ld+t] + m7 + m11
			q0 := m4 - m8 - m[12*ld+t]
			q1 := m5 - m9 - m[13*ld+t]
			q2 := m6 - m10 - m[14*ld+t]
			q3 := m7 - m11 - m[15*ld+t]
			// The bottom row first, so that a tile cut at the bottom leaves the top one.
			if c+1 < g.ow {
				y1[c+1] = q1 - q2 - q3 + bias
				y0[c+1] = s1 - s2 - s3 + bias
			}
			y1[c] = q0 + q1 + q2 + bias
			y0[c] = s0 + s1 + s2 + bias
		}
	}
}

// winoOutputGrad writes A·dy·Aᵀ of the channel plane dy (oh×ow) into the tiles t0 onwards of dm,
// the channel's [16][ld] block: the transposed output transform.
func (g *convGeom) winoOutputGrad(dm []float32, ld, t0 int, dy []float32) {
	wg := g.wino
	dm = dm[:15*ld+t0+wg.tiles]
	if winoVector && g.oh%2 == 0 && g.ow%2 == 0 {
		for ty := 0; ty < wg.th; ty++ {
			y0 := dy[2*ty*g.ow : (2*ty+2)*g.ow]
			for tx := 0; tx < wg.tw; tx += 16 {
				n, t := min(16, wg.tw-tx), t0+ty*wg.tw+tx
				_, _ = dm[15*ld+t+n-1], y0[g.ow+2*(tx+n)-1]
				winoOutputGrad16(&dm[t], ld, &y0[2*tx], &y0[g.ow+2*tx], n)
			}
		}
		return
	}
	t := t0
	for ty := 0; ty < wg.th; ty++ {
		y0 := dy[2*ty*g.ow:][:g.ow]
		var y1 []float32
		if 2*ty+1 < g.oh {
			y1 = dy[(2*ty+1)*g.ow:][:g.ow]
		}
		for c := 0; c < g.ow; c, t = c+2, t+1 {
			var p, q, r, s float32 // the tile [[p q] [r s]], zero past the edges
			p = y0[c]
			if c+1 < g.ow {
				q = y0[c+1]
			}
			if y1 != nil {
				r = y1[c]
				if c+1 < g.ow {
					s = y1[c+1]
				}
			}
			// A·dy has rows (p, q), (p+r, q+s), (p-r, q-s), (-r, -s); ·Aᵀ takes each row (a, b)
			// to (a, a+b, a-b, -b).
			dm[t] = p
			dm[ld+t] = p + q
			dm[2*ld+t] = p - q
			dm[3*ld+t] = -q
			a, b := p+r, q+s
			dm[4*ld+t] = a
			dm[5*ld+t] = a + b
			dm[6*ld+t] = a - b
			dm[7*ld+t] = -b
			a, b = p-r, q-s
			dm[8*ld+t] = a
			dm[9*ld+t] = a + b
			dm[10*ld+t] = a - b
			dm[11*ld+t] = -b
			dm[12*ld+t] = -r
			dm[13*ld+t] = -r - s
			dm[14*ld+t] = s - r
			dm[15*ld+t] = s
		}
	}
}

// winoInputGrad sets the channel plane dx (h×w) to the sum of B·dv·Bᵀ over the tiles t0 onwards of
// dv, the channel's [16][ld] block, each added where its input tile was read; pad is scratch for
// the padded plane.
func (g *convGeom) winoInputGrad(dx []float32, dv []float32, ld, t0 int, pad []float32) {
	wg := g.wino
	pw := wg.pw
	pad = pad[:wg.ph*pw]
	clear(pad)
	dv = dv[:15*ld+t0+wg.tiles]
	if winoVector {
		for ty := 0; ty < wg.th; ty++ {
			for tx := 0; tx < wg.tw; tx += 16 {
				n, t, r := min(16, wg.tw-tx), t0+ty*wg.tw+tx, 2*ty*pw+2*tx
				_, _ = dv[15*ld+t+n-1], pad[r+3*pw+2*n+1]
				winoInputGrad16(&pad[r], pw, &dv[t], ld, n)
			}
		}
	} else {
		g.winoInputGradScalar(pad, dv, ld, t0)
	}
	for r := 0; r < g.h; r++ {
		copy(dx[r*g.w:(r+1)*g.w], pad[(r+g.pad)*pw+g.pad:])
	}
}

// winoInputGradScalar is winoInputGrad's sum over the tiles into the padded plane pad, without
// vector instructions.
func (g *convGeom) winoInputGradScalar(pad, dv []float32, ld, t0 int) {
	wg := g.wino
	pw := wg.pw
	t := t0
	for ty := 0; ty < wg.th; ty++ {
		r0 := pad[2*ty*pw:][:pw]
		r1 := pad[(2*ty+1)*pw:][:pw]
		r2 := pad[(2*ty+2)*pw:][:pw]
		r3 := pad[(2*ty+3)*pw:][:pw]
		for c := 0; c+4 <= pw; c, t = c+2, t+1 {
			a, b, e, d := r0[c:c+4:c+4], r1[c:c+4:c+4], r2[c:c+4:c+4], r3[c:c+4:c+4]
			// B·v of a 4-vector v is (v0, v1-v2+v3, v1+v2-v0, -v3): along the rows of dv into
			// rows s, k, l and n, then down the columns into the plane.
			v0, v1, v2, v3 := dv[t], dv[ld+t], dv[2*ld+t], dv[3*ld+t]
			s0, s1, s2, s3 := v0, v1-v2+v3, v1+v2-v0, -v3
			v0, v1, v2, v3 = dv[4*ld+t], dv[5*ld+t], dv[6*ld+t], dv[7*ld+t]
			k0, k1, k2, k3 := v0, v1-v2+v3, v1+v2-v0, -v3
			v0, v1, v2, v3 = dv[8*ld+t], dv[9*ld+t], dv[10*ld+t], dv[11*ld+t]
			l0, l1, l2, l3 := v0, v1-v2+v3, v1+v2-v0, -v3
			v0, v1, v2, v3 = dv[12*ld+t], dv[13*ld+t], dv[14*ld+t], dv[15*ld+t]
			n0, n1, n2, n3 := v0, v1-v2+v3, v1+v2-v0, -v3
			a[0] += s0
			a[1] += s1
			a[2] += s2
			a[3] += s3
			b[0] += k0 - l0 + n0
			b[1] += k1 - l1 + n1
			b[2] += k2 - l2 + n2
			b[3] += k3 - l3 + n3
			e[0] += k0 + l0 - s0
			e[1] += k1 + l1 - s1
			e[2] += k2 + l2 - s2
			e[3] += k3 + l3 - s3
			d[0] -= n0
			d[1] -= n1
			d[2] -= n2
			d[3] -= n3
		}
	}
}

// winoScratch is the working memory of a Winograd pass: per worker, the transformed tiles of a
// group's input side and output side, and padded planes for the transforms.
type winoScratch struct {
	ins, outs, planes scratch
	groups            []winoGroup // per worker, kept so that taking their address allocates nothing
	begun             []bool      // per slot, whether its filter-gradient sum has begun
}

// ensure sizes s for a batch of nb images.
func (s *winoScratch) ensure(g *convGeom, nb int) {
	wg := g.wino
	k, size, _ := groupChunks(nb, wg.group)
	cs := winoChannelStride(size * wg.tiles)
	s.ins.ensure(k, g.cin*cs)
	s.outs.ensure(k, g.cout*cs)
	s.planes.ensure(max(k, parallel.Workers()), wg.ph*wg.pw+winoSlack)
	for len(s.groups) < k {
		s.groups = append(s.groups, winoGroup{})
	}
}

// winoChannelStride is the distance between the transformed tiles of consecutive channels, for
// ld tiles per ξ.
func winoChannelStride(ld int) int { return 16*ld + winoSkew }

// winoStage is one of the per-plane passes of a group of images, or (stageOutput,
// stageInputGrad, stageFilterGrad) the GEMMs that lead to it.
type winoStage int

const (
	stageInput      winoStage = iota // x → V
	stageOutput                      // M → y (+ bias); GEMMs M = U·V
	stageOutputGrad                  // dy → dM
	stageInputGrad                   // dV → dx; GEMMs dV = Uᵀ·dM
	stageFilterGrad                  // GEMMs only: dU += dM·Vᵀ
)

// winoGroup is the work on images [n0, n0+cnt) of a batch: its tensors and their transformed
// tiles, side by side, ld tiles per row.
type winoGroup struct {
	g       *convGeom
	n0, cnt int
	ld      int       // tiles per ξ
	cs      int       // winoChannelStride(ld)
	img     []float32 // x or dx
	res     []float32 // y or dy
	bias    []float32
	beta    float32   // for the filter gradient: 0 to set the accumulator, 1 to add to it
	tin     []float32 // V or dV: per input channel, cs apart, [16][ld]
	tout    []float32 // M or dM: per output channel, cs apart, [16][ld]
	planes  scratch
}

// run runs stage over planes [lo, hi) of the group, numbered image-major; pad is the
// caller's scratch space.
func (w *winoGroup) run(stage winoStage, lo, hi int, pad []float32) {
	g, wg := w.g, w.g.wino
	in, out := g.cin*g.h*g.w, g.cout*g.outPlane
	for i := lo; i < hi; i++ {
		switch stage {
		case stageInput, stageInputGrad:
			j, c := i/g.cin, i%g.cin
			img := w.img[(w.n0+j)*in+c*g.h*g.w:][:g.h*g.w]
			if stage == stageInput {
				g.winoInput(w.tin[c*w.cs:], w.ld, j*wg.tiles, img, pad)
			} else {
				g.winoInputGrad(img, w.tin[c*w.cs:], w.ld, j*wg.tiles, pad)
			}
		default:
			j, c := i/g.cout, i%g.cout
			res := w.res[(w.n0+j)*out+c*g.outPlane:][:g.outPlane]
			if stage == stageOutputGrad {
				g.winoOutputGrad(w.tout[c*w.cs:], w.ld, j*wg.tiles, res)
				continue
			}
			var b float32
			if w.bias != nil {
				b = w.bias[c]
			}
			g.winoOutput(res, w.tout[c*w.cs:], w.ld, j*wg.tiles, b)
		}
	}
}

// stage runs stage over all planes of the group: on the calling goroutine with worker's scratch
// space, or across cores when par is set.
func (w *winoGroup) stage(stage winoStage, worker int, par bool) {
	n := w.cnt * w.g.cin
	if stage == stageOutput || stage == stageOutputGrad {
		n = w.cnt * w.g.cout
	}
	if !par {
		w.run(stage, 0, n, w.planes[worker])
		return
	}
	w.stageParallel(stage, n)
}

// stageParallel is the parallel part of stage, a function of its own so that its closure is
// not allocated by serial calls.
func (w *winoGroup) stageParallel(stage winoStage, n int) {
	parallel.For(n, 4, func(chunk, lo, hi int) { w.run(stage, lo, hi, w.planes[chunk]) })
}

// gemms runs the 16 GEMMs of stage for the group, across cores when par is set; u holds the
// transformed filters, or for stageFilterGrad the transformed gradient they add to.
func (w *winoGroup) gemms(stage winoStage, u []float32, par bool) {
	if !par {
		w.gemmRange(stage, u, 0, 16)
		return
	}
	w.gemmsParallel(stage, u)
}

func (w *winoGroup) gemmsParallel(stage winoStage, u []float32) {
	parallel.Dynamic(16, 16, func(_, _, lo, hi int) { w.gemmRange(stage, u, lo, hi) })
}

func (w *winoGroup) gemmRange(stage winoStage, u []float32, lo, hi int) {
	g, ld, cs := w.g, w.ld, w.cs
	nu := g.wino.us
	for xi := lo; xi < hi; xi++ {
		switch stage {
		case stageOutput:
			Sgemm(false, false, g.cout, ld, g.cin, 1, u[xi*nu:], g.cin, w.tin[xi*ld:], cs, 0, w.tout[xi*ld:], cs, false)
		case stageInputGrad:
			Sgemm(true, false, g.cin, ld, g.cout, 1, u[xi*nu:], g.cin, w.tout[xi*ld:], cs, 0, w.tin[xi*ld:], cs, false)
		case stageFilterGrad:
			Sgemm(false, true, g.cout, g.cin, ld, 1, w.tout[xi*ld:], cs, w.tin[xi*ld:], cs, w.beta, u[xi*nu:], g.cin, false)
		}
	}
}

// group returns the group of images [n0, n0+cnt) with worker's transformed-tile space.
func (s *winoScratch) group(g *convGeom, worker, n0, cnt int) *winoGroup {
	ld := cnt * g.wino.tiles
	cs := winoChannelStride(ld)
	w := &s.groups[worker]
	*w = winoGroup{g: g, n0: n0, cnt: cnt, ld: ld, cs: cs,
		tin: s.ins.at(worker, g.cin*cs), tout: s.outs.at(worker, g.cout*cs), planes: s.planes}
	return w
}

// winoForward sets y to the convolution of the nb images of x with the transformed filters u,
// plus bias (nil for none).
func (g *convGeom) winoForward(y, x, u, bias []float32, nb int, s *winoScratch) {
	s.ensure(g, nb)
	forEachGroupOf(nb, g.wino.group, func(worker, _, n0, cnt int, par bool) {
		w := s.group(g, worker, n0, cnt)
		w.img, w.res, w.bias = x, y, bias
		w.stage(stageInput, worker, par)
		w.gemms(stageOutput, u, par)
		w.stage(stageOutput, worker, par)
	})
}

// winoBackwardData sets dx to the input gradient of the nb images whose output gradient is dy,
// for transformed filters u.
func (g *convGeom) winoBackwardData(dx, dy, u []float32, nb int, s *winoScratch) {
	s.ensure(g, nb)
	forEachGroupOf(nb, g.wino.group, func(worker, _, n0, cnt int, par bool) {
		w := s.group(g, worker, n0, cnt)
		w.img, w.res = dx, dy
		w.stage(stageOutputGrad, worker, par)
		w.gemms(stageInputGrad, u, par)
		w.stage(stageInputGrad, worker, par)
	})
}

// winoBackwardFilter sets dw to the filter gradient of the nb images of x whose output gradient
// is dy. The transformed gradient is summed per slot of images into acc ([slot][16][cout][cin]),
// then over the slots in order, so that it does not depend on which core ran which images.
func (g *convGeom) winoBackwardFilter(dw, x, dy []float32, nb int, s *winoScratch, acc *scratch) {
	s.ensure(g, nb)
	_, _, slots := groupChunks(nb, g.wino.group)
	nu := 16 * g.wino.us
	acc.ensure(slots, nu)
	// The first group of a slot sets its sum (beta 0) instead of adding to a cleared one.
	if len(s.begun) < slots {
		s.begun = make([]bool, slots)
	}
	clear(s.begun)
	forEachGroupOf(nb, g.wino.group, func(worker, slot, n0, cnt int, par bool) {
		w := s.group(g, worker, n0, cnt)
		w.img, w.res, w.beta = x, dy, 1
		if !s.begun[slot] {
			w.beta, s.begun[slot] = 0, true
		}
		w.stage(stageInput, worker, par)
		w.stage(stageOutputGrad, worker, par)
		w.gemms(stageFilterGrad, acc.at(slot, nu), par)
	})
	du := acc.at(0, nu)
	for i := 1; i < slots; i++ {
		addTo(du, acc.at(i, nu))
	}
	g.winoFilterGrad(dw, du)
}
