package kernels

import (
	"fmt"

	"github.com/ssfusion/ssfusion/internal/parallel"
	"gonum.org/v1/gonum/blas/gonum"
)

// ConvShape is the geometry of a 2-D convolution over NCHW images: In channels of Height×Width,
// Out channels of filters Kernel×Kernel, and equal stride and zero padding on both axes.
type ConvShape struct {
	In, Height, Width int
	Out, Kernel       int
	Stride, Pad       int
}

// ConvAlgorithm chooses how a Conv computes. The algorithms agree to float32 rounding, not bit
// for bit, so the choice is fixed when the Conv is made and stays for all its passes.
type ConvAlgorithm int

const (
	// ConvAuto runs Winograd where it computes the convolution (3×3, stride 1, padding at most
	// 2) and there are enough channels for its transforms to pay, and GEMMs over column matrices
	// (im2col) everywhere else.
	ConvAuto ConvAlgorithm = iota
	// ConvWinograd runs Winograd wherever it computes the convolution, however few the
	// channels, and im2col elsewhere: for tests that reach Winograd with small models.
	ConvWinograd
	// ConvIm2col never runs Winograd: for benchmarks that compare the two.
	ConvIm2col
)

// Conv is a 2-D convolution of fixed geometry, forward and backward, with the working memory its
// passes keep from one call to the next, so that the steady state allocates nothing. Tensors are
// float32, row-major: filters (Out, In, Kernel, Kernel), images (In, Height, Width), outputs
// (Out, OH, OW) where OH×OW is OutputSize, and a batch is its images one after another.
//
// The work is split across cores (package internal/parallel) in a fixed number of pieces whose
// partial sums are added in a fixed order, so that results do not depend on the number of cores
// or on which core ran which images. A Conv is not safe for concurrent use: BackwardData reuses
// what Forward computed.
type Conv struct {
	g           convGeom
	fwd, dx, dw convWork
	acc         scratch // BackwardFilter's partial sums, one per slot of images

	// With Winograd, the transformed filters of the last Forward, which BackwardData reuses.
	u []float32

	// Without Winograd, for stride 1 and "same" padding: the geometry of the convolution of the
	// output gradient with the flipped filters wf, which BackwardData runs instead of col2im
	// when it costs less (transposedGeom).
	flip    bool
	flipped convGeom
	wf      []float32
}

// convWork is one pass's working memory: per worker, column matrices, outputs or output
// gradients of grouped images, and Winograd's transformed tiles.
type convWork struct {
	cols, grouped scratch
	wino          winoScratch
}

// NewConv returns the convolution of shape s computed with alg, or an error when s has no
// output (a kernel larger than the padded image) or a kernel, stride or padding out of range.
func NewConv(s ConvShape, alg ConvAlgorithm) (*Conv, error) {
	g, err := newConvGeom(s.In, s.Height, s.Width, s.Out, s.Kernel, s.Stride, s.Pad)
	if err != nil {
		return nil, err
	}
	c := &Conv{g: g}
	if alg == ConvIm2col || !c.g.useWinograd(alg == ConvWinograd) {
		c.flipped, c.flip = c.g.transposedGeom()
	}
	return c, nil
}

// OutputSize returns the height and width of an output channel.
func (c *Conv) OutputSize() (h, w int) { return c.g.oh, c.g.ow }

// Forward sets y to the convolution of the batch images of x with the filters w, plus bias[o]
// on output channel o (bias nil for none). Slices too short for their shapes panic.
func (c *Conv) Forward(y, x, w, bias []float32, batch int) {
	g := &c.g
	if g.wino != nil {
		c.u = g.winoFilters(c.u, w)
		g.winoForward(y, x, c.u, bias, batch, &c.fwd.wino)
		return
	}
	g.forward(y, x, w, bias, batch, &c.fwd.cols, &c.fwd.grouped)
}

// BackwardData sets dx to the gradient of the batch input images for the output gradient dy and
// the filters w. w must be the filters the last Forward was given: with Winograd, BackwardData
// reuses the transformed filters Forward kept, which saves transforming them again, and
// transforms w itself only when no Forward ran. Slices too short for their shapes panic.
func (c *Conv) BackwardData(dx, dy, w []float32, batch int) {
	g := &c.g
	if g.wino != nil {
		if len(c.u) != 16*g.wino.us { // no Forward ran: an error elsewhere, but be exact
			c.u = g.winoFilters(c.u, w)
		}
		g.winoBackwardData(dx, dy, c.u, batch, &c.dx.wino)
		return
	}
	// Flipping costs a pass over the filters, col2im one over cin·k·k columns per position: with
	// few positions per filter (the 2×2 and 4×4 layers of VGG) col2im costs less.
	if c.flip && batch*g.outPlane >= 4*max(g.cin, g.cout) {
		if len(c.wf) != len(w) {
			c.wf = make([]float32, len(w))
		}
		g.flipFilters(c.wf, w)
		c.flipped.forward(dx, dy, c.wf, nil, batch, &c.dx.cols, &c.dx.grouped)
		return
	}
	imgIn := g.cin * g.h * g.w
	k, size, _ := g.scratchChunks(batch)
	c.dx.cols.ensure(k, g.kdim*size*g.outPlane)
	if size > 1 {
		c.dx.grouped.ensure(k, g.cout*size*g.outPlane)
	}
	g.forEachGroup(batch, func(chunk, _, n0, cnt int, par bool) {
		ld := cnt * g.outPlane
		dyg := dy[n0*g.cout*g.outPlane : (n0+1)*g.cout*g.outPlane]
		if cnt > 1 {
			dyg = c.dx.grouped.at(chunk, g.cout*ld)
			gather(dyg, dy, g.cout, g.outPlane, n0, cnt)
		}
		if g.direct && cnt == 1 {
			Sgemm(true, false, g.kdim, ld, g.cout, 1, w, g.kdim, dyg, ld, 0, dx[n0*imgIn:(n0+1)*imgIn], ld, par)
			return
		}
		col := c.dx.cols.at(chunk, g.kdim*ld)
		Sgemm(true, false, g.kdim, ld, g.cout, 1, w, g.kdim, dyg, ld, 0, col, ld, par)
		if !par {
			for j := 0; j < cnt; j++ {
				g.col2im(dx[(n0+j)*imgIn:(n0+j+1)*imgIn], col[j*g.outPlane:], ld)
			}
			return
		}
		each(cnt, par, func(j int) {
			g.col2im(dx[(n0+j)*imgIn:(n0+j+1)*imgIn], col[j*g.outPlane:], ld)
		})
	})
}

// BackwardFilter sets dw to the gradient of the filters for the batch images of x and their
// output gradient dy: Σ dy·colᵀ over the images, one partial sum per slot of images, added up in
// slot order. Slices too short for their shapes panic.
func (c *Conv) BackwardFilter(dw, x, dy []float32, batch int) {
	g := &c.g
	if g.wino != nil {
		g.winoBackwardFilter(dw, x, dy, batch, &c.dw.wino, &c.acc)
		return
	}
	k, size, slots := g.scratchChunks(batch)
	c.dw.cols.ensure(k, g.kdim*size*g.outPlane)
	if size > 1 {
		c.dw.grouped.ensure(k, g.cout*size*g.outPlane)
	}
	n := g.cout * g.kdim
	dw = dw[:n]
	c.acc.ensure(slots, n)
	clear(dw)
	for s := 1; s < slots; s++ {
		clear(c.acc.at(s, n))
	}
	g.forEachGroup(batch, func(chunk, slot, n0, cnt int, par bool) {
		acc := dw
		if slot > 0 {
			acc = c.acc.at(slot, n)
		}
		dyg := dy[n0*g.cout*g.outPlane : (n0+1)*g.cout*g.outPlane]
		if cnt > 1 {
			dyg = c.dw.grouped.at(chunk, g.cout*cnt*g.outPlane)
			gather(dyg, dy, g.cout, g.outPlane, n0, cnt)
		}
		col, ld := g.columns(c.dw.cols.at(chunk, g.kdim*cnt*g.outPlane), x, n0, cnt, par)
		Sgemm(false, true, g.cout, g.kdim, ld, 1, dyg, ld, col, ld, 1, acc, g.kdim, par)
	})
	for s := 1; s < slots; s++ {
		for i, a := range c.acc.at(s, n) {
			dw[i] += a
		}
	}
}

// scratch is per-worker working memory, sized before the workers start.
type scratch [][]float32

// ensure makes room for k workers' n elements each.
func (s *scratch) ensure(k, n int) {
	for len(*s) < k {
		*s = append(*s, nil)
	}
	for i := 0; i < k; i++ {
		if len((*s)[i]) < n {
			(*s)[i] = make([]float32, n)
		}
	}
}

// at returns worker c's space of n elements; ensure must have been called.
func (s scratch) at(c, n int) []float32 { return s[c][:n] }

// convGeom is the geometry of a 2-D convolution over NCHW input with a square kernel and equal
// stride and padding on both axes.
type convGeom struct {
	cin, h, w      int
	cout, k        int
	stride, pad    int
	oh, ow         int
	direct         bool      // 1x1, stride 1, no padding: an image is its own column matrix
	kdim, outPlane int       // cin*k*k, oh*ow
	group          int       // images per GEMM
	taps           []convTap // per kernel tap (i·k+j), when shifted

	// For stride 1 and same padding (a k×k kernel, k > 1, with padding (k-1)/2): where row
	// (c, i, j) of the column matrix starts in shiftedPlanes' output, whose planes are extent long.
	rows   []int
	extent int

	wino *winoGeom // the tiling, when the convolution runs with Winograd (winograd.go)
}

// convTap is where one kernel tap of a shifted geometry reads: output position q reads input
// q+off for q in [qlo, qhi), except gap positions every w from gapAt (row ends, which read
// padding).
type convTap struct {
	off, qlo, qhi, gapAt, gap int
}

// minGEMMWidth is the row length below which the images of a batch are put side by side into one
// GEMM: the kernels of Sgemm, and Gonum's Sgemm even more, lose most of their speed on short
// rows, and the deep layers of VGG have 2×2 or 4×4 feature maps.
const minGEMMWidth = 256

func newConvGeom(cin, h, w, cout, k, stride, pad int) (convGeom, error) {
	g := convGeom{cin: cin, h: h, w: w, cout: cout, k: k, stride: stride, pad: pad}
	if k < 1 || stride < 1 || pad < 0 {
		return g, fmt.Errorf("conv: bad kernel %d, stride %d or padding %d", k, stride, pad)
	}
	if h+2*pad < k || w+2*pad < k {
		return g, fmt.Errorf("conv: input %dx%d too small for a %dx%d kernel with padding %d", h, w, k, k, pad)
	}
	g.oh = (h+2*pad-k)/stride + 1
	g.ow = (w+2*pad-k)/stride + 1
	g.direct = k == 1 && stride == 1 && pad == 0
	g.kdim = cin * k * k
	g.outPlane = g.oh * g.ow
	g.group = max(1, (minGEMMWidth+g.outPlane-1)/g.outPlane)
	if stride == 1 && k > 1 && 2*pad == k-1 {
		g.extent = g.outPlane + 2*pad*w
		g.rows = make([]int, g.kdim)
		for r := range g.rows {
			c, i, j := r/(k*k), r/k%k, r%k
			g.rows[r] = (c*k+j)*g.extent + i*w
		}
	}
	if g.shifted() {
		g.taps = make([]convTap, k*k)
		for t := range g.taps {
			off, qlo, qhi, xlo, xhi := g.tapRange(t/k, t%k)
			g.taps[t] = convTap{off: off, qlo: qlo, qhi: qhi, gapAt: qlo - xlo + xhi, gap: g.w - xhi + xlo}
		}
	}
	return g, nil
}

// convSlots is the number of pieces the images of a batch are cut into when they run one image
// (or one group) per core. It is fixed, so that the filter gradient, summed per piece and then
// over the pieces in order, depends neither on the number of cores nor on which core ran which
// piece.
const convSlots = 8

// minSlotGroups is the least number of image groups that run one group per core; fewer groups
// (the 2×2 and 4×4 layers of VGG, whose batch is one or two groups) run one after another, each
// GEMM split across the cores.
const minSlotGroups = 4

// forEachGroup calls fn for the images of a batch of nb, in groups of g.group side by side.
// When there are enough groups, they go in convSlots pieces (slot) that the cores take as they
// become free, each call with its core's (worker's) scratch space and a serial GEMM; otherwise the
// groups run one after another, worker and slot 0, each with its GEMM (and column work) split
// across cores (par).
func (g *convGeom) forEachGroup(nb int, fn func(worker, slot, n0, cnt int, par bool)) {
	forEachGroupOf(nb, g.group, fn)
}

// forEachGroupOf is forEachGroup for groups of group images.
func forEachGroupOf(nb, group int, fn func(worker, slot, n0, cnt int, par bool)) {
	size := min(group, nb)
	groups := (nb + size - 1) / size
	if groups >= minSlotGroups || size == 1 {
		parallel.Dynamic(groups, convSlots, func(worker, slot, lo, hi int) {
			for gi := lo; gi < hi; gi++ {
				n0 := gi * size
				fn(worker, slot, n0, min(size, nb-n0), false)
			}
		})
		return
	}
	for n0 := 0; n0 < nb; n0 += size {
		fn(0, 0, n0, min(size, nb-n0), true)
	}
}

// scratchChunks returns the number of workers forEachGroup runs, each needing scratch space of
// its own, the most images per call and the number of slots.
func (g *convGeom) scratchChunks(nb int) (k, size, slots int) {
	return groupChunks(nb, g.group)
}

// groupChunks is scratchChunks for forEachGroupOf.
func groupChunks(nb, group int) (k, size, slots int) {
	size = min(group, nb)
	groups := (nb + size - 1) / size
	if groups >= minSlotGroups || size == 1 {
		return parallel.DynamicWorkers(groups, convSlots), size, min(groups, convSlots)
	}
	return 1, size, 1
}

// span returns the output positions o in [lo, hi) whose input coordinate o*stride-pad+off lies
// inside [0, n).
func (g *convGeom) span(off, n, outN int) (lo, hi int) {
	// o*s - p + off >= 0  <=>  o >= ceil((p-off)/s)
	d := g.pad - off
	if d > 0 {
		lo = (d + g.stride - 1) / g.stride
	}
	// o*s - p + off <= n-1  <=>  o <= floor((n-1+p-off)/s)
	e := n - 1 + g.pad - off
	if e < 0 {
		return lo, lo
	}
	hi = min(e/g.stride+1, outN)
	return min(lo, hi), hi
}

// shifted reports whether every row of the column matrix is its input plane shifted by a constant
// offset: with stride 1 and output rows as long as input rows ("same" padding), output position q
// reads input q + (i-pad)·w + (j-pad) for kernel tap (i, j), except at the left and right edges,
// where that reaches into the neighbouring input row and the column entry must be 0 instead.
func (g *convGeom) shifted() bool { return g.stride == 1 && g.ow == g.w }

// tapRange returns, for kernel tap (i, j) of a shifted geometry, the offset from an output
// position to its input position and the range [qlo, qhi) of output positions between the first
// and the last valid one (empty when no output position sees the input); inside that range the
// invalid positions are the ends of rows, [oy·w+xhi, (oy+1)·w+xlo).
func (g *convGeom) tapRange(i, j int) (off, qlo, qhi, xlo, xhi int) {
	ylo, yhi := g.span(i, g.h, g.oh)
	xlo, xhi = g.span(j, g.w, g.ow)
	off = (i-g.pad)*g.w + j - g.pad
	if ylo >= yhi || xlo >= xhi {
		return off, 0, 0, xlo, xhi
	}
	return off, ylo*g.w + xlo, (yhi-1)*g.w + xhi, xlo, xhi
}

// im2col writes the column matrix (cin·k·k rows of oh·ow) of one image x (cin, h, w) into col,
// whose rows are ld apart: images of a group sit side by side.
func (g *convGeom) im2col(col []float32, ld int, x []float32) {
	if g.shifted() {
		// One copy per row of the column matrix, then zeros at the row ends it got wrong.
		r := 0
		for c := 0; c < g.cin; c++ {
			plane := x[c*g.h*g.w : (c+1)*g.h*g.w]
			for _, tp := range g.taps {
				dst := col[r*ld : r*ld+g.outPlane]
				r++
				if tp.qlo >= tp.qhi {
					clear(dst)
					continue
				}
				clear(dst[:tp.qlo])
				copy(dst[tp.qlo:tp.qhi], plane[tp.qlo+tp.off:tp.qhi+tp.off])
				clear(dst[tp.qhi:])
				zeroGaps(dst, tp.gapAt, tp.qhi, g.w, tp.gap)
			}
		}
		return
	}
	r := 0
	for c := 0; c < g.cin; c++ {
		plane := x[c*g.h*g.w : (c+1)*g.h*g.w]
		for i := 0; i < g.k; i++ {
			ylo, yhi := g.span(i, g.h, g.oh)
			for j := 0; j < g.k; j++ {
				xlo, xhi := g.span(j, g.w, g.ow)
				dst := col[r*ld : r*ld+g.outPlane]
				r++
				clear(dst[:ylo*g.ow])
				clear(dst[yhi*g.ow:])
				for oy := ylo; oy < yhi; oy++ {
					row := dst[oy*g.ow : (oy+1)*g.ow]
					clear(row[:xlo])
					clear(row[xhi:])
					src := plane[(oy*g.stride-g.pad+i)*g.w:]
					if g.stride == 1 {
						copy(row[xlo:xhi], src[xlo-g.pad+j:])
						continue
					}
					if xlo < xhi {
						gatherStrided(row[xlo:xhi], src[xlo*g.stride-g.pad+j:], g.stride)
					}
				}
			}
		}
	}
}

// gatherStrided sets dst[i] = src[i·stride], with the bounds checked once instead of per element.
func gatherStrided(dst, src []float32, stride int) {
	src = src[:(len(dst)-1)*stride+1]
	if stride == 2 {
		for i := range dst {
			dst[i] = src[2*i]
		}
		return
	}
	for i := range dst {
		dst[i] = src[i*stride]
	}
}

// shiftedPlanes writes, for a geometry with rows, the planes whose overlapping windows are the
// rows of the column matrix of one image x: for every channel c and kernel column j, pad·w zeros,
// the plane shifted by j-pad with zeros where that wraps around a row's end, and pad·w zeros.
// Row (c, i, j) of the column matrix is the window of that plane i rows of the image on, so the
// k·k copies of every plane im2col makes shrink to k.
func (g *convGeom) shiftedPlanes(e, x []float32) {
	lead := g.pad * g.w
	for c := 0; c < g.cin; c++ {
		plane := x[c*g.outPlane : (c+1)*g.outPlane]
		for j := 0; j < g.k; j++ {
			d := e[(c*g.k+j)*g.extent:][:g.extent]
			clear(d[:lead])
			clear(d[lead+g.outPlane:])
			body := d[lead : lead+g.outPlane]
			switch s := j - g.pad; {
			case s >= g.w || -s >= g.w: // every position lies past a row's end
				clear(body)
			case s > 0:
				copy(body, plane[s:])
				clear(body[g.outPlane-s:])
				zeroGaps(body, g.w-s, g.outPlane, g.w, s)
			case s < 0:
				copy(body[-s:], plane)
				zeroGaps(body, 0, g.outPlane, g.w, -s)
			default:
				copy(body, plane)
			}
		}
	}
}

// zeroGaps clears n elements every stride elements of v from q up to end: the row ends of a
// shifted column row. n is 1 or 2 for the usual kernels, too short for clear's call to pay.
func zeroGaps(v []float32, q, end, stride, n int) {
	switch {
	case n <= 0:
	case n == 1:
		for ; q < end; q += stride {
			v[q] = 0
		}
	case n == 2:
		for ; q < end; q += stride {
			v[q], v[q+1] = 0, 0
		}
	default:
		for ; q < end; q += stride {
			clear(v[q : q+n])
		}
	}
}

// col2im sets one image gradient dx (cin, h, w) to the sum of a column matrix's entries (rows ld
// apart) over the positions they were read from. In a shifted geometry the centre tap covers
// every input position with offset 0, so it is copied (no clearing needed); the other taps have
// their row ends zeroed in col (scratch, no longer needed) and are added with one vector
// operation per row of col.
func (g *convGeom) col2im(dx []float32, col []float32, ld int) {
	if g.shifted() {
		center := g.pad*g.k + g.pad
		for c := 0; c < g.cin; c++ {
			plane := dx[c*g.h*g.w : (c+1)*g.h*g.w]
			r0 := c * g.k * g.k
			copy(plane, col[(r0+center)*ld:][:g.outPlane])
			for t, tp := range g.taps {
				if t == center || tp.qlo >= tp.qhi {
					continue
				}
				src := col[(r0+t)*ld : (r0+t)*ld+g.outPlane]
				zeroGaps(src, tp.gapAt, tp.qhi, g.w, tp.gap)
				addTo(plane[tp.qlo+tp.off:tp.qhi+tp.off], src[tp.qlo:tp.qhi])
			}
		}
		return
	}
	clear(dx)
	r := 0
	for c := 0; c < g.cin; c++ {
		plane := dx[c*g.h*g.w : (c+1)*g.h*g.w]
		for i := 0; i < g.k; i++ {
			ylo, yhi := g.span(i, g.h, g.oh)
			for j := 0; j < g.k; j++ {
				xlo, xhi := g.span(j, g.w, g.ow)
				src := col[r*ld : r*ld+g.outPlane]
				r++
				for oy := ylo; oy < yhi; oy++ {
					row := src[oy*g.ow : (oy+1)*g.ow]
					dst := plane[(oy*g.stride-g.pad+i)*g.w:]
					if g.stride == 1 {
						d := dst[xlo-g.pad+j : xhi-g.pad+j]
						for t, v := range row[xlo:xhi] {
							d[t] += v
						}
						continue
					}
					for ox := xlo; ox < xhi; ox++ {
						dst[ox*g.stride-g.pad+j] += row[ox]
					}
				}
			}
		}
	}
}

// addTo sets dst += src with Gonum's vectorised axpy: about three times a Go loop.
func addTo(dst, src []float32) {
	gonum.Implementation{}.Saxpy(len(src), 1, src, 1, dst, 1)
}

// columns returns the column matrix of images [n0, n0+cnt) of x, side by side, using scratch
// when the images are not already in that form.
func (g *convGeom) columns(scratch, x []float32, n0, cnt int, par bool) ([]float32, int) {
	ld := cnt * g.outPlane
	in := g.cin * g.h * g.w
	if g.direct && cnt == 1 {
		return x[n0*in : (n0+1)*in], ld
	}
	col := scratch[:g.kdim*ld]
	if par {
		g.columnsParallel(col, x, n0, cnt)
		return col, ld
	}
	for j := 0; j < cnt; j++ {
		g.im2col(col[j*g.outPlane:], ld, x[(n0+j)*in:(n0+j+1)*in])
	}
	return col, ld
}

// columnsParallel is the parallel part of columns, a function of its own because its closure
// would otherwise move columns' variables to the heap on every call, serial ones included.
func (g *convGeom) columnsParallel(col, x []float32, n0, cnt int) {
	ld, in := cnt*g.outPlane, g.cin*g.h*g.w
	each(cnt, true, func(j int) { g.im2col(col[j*g.outPlane:], ld, x[(n0+j)*in:(n0+j+1)*in]) })
}

// each calls fn(0..n-1), across cores when par is set.
func each(n int, par bool, fn func(int)) {
	if !par {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	parallel.For(n, 1, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			fn(i)
		}
	})
}

// gather copies images [n0, n0+cnt) of a (B, C, plane) tensor into a (C, cnt·plane) matrix.
func gather(dst, src []float32, c, plane, n0, cnt int) {
	ld := cnt * plane
	for j := 0; j < cnt; j++ {
		img := src[(n0+j)*c*plane : (n0+j+1)*c*plane]
		for ch := 0; ch < c; ch++ {
			copy(dst[ch*ld+j*plane:ch*ld+(j+1)*plane], img[ch*plane:(ch+1)*plane])
		}
	}
}

// scatter is the inverse of gather.
func scatter(dst, src []float32, c, plane, n0, cnt int) {
	ld := cnt * plane
	for j := 0; j < cnt; j++ {
		img := dst[(n0+j)*c*plane : (n0+j+1)*c*plane]
		for ch := 0; ch < c; ch++ {
			copy(img[ch*plane:(ch+1)*plane], src[ch*ld+j*plane:ch*ld+(j+1)*plane])
		}
	}
}

// forward sets y to the convolution of the nb images of x with the filters w (cout, kdim) plus
// bias (nil for none), with per-chunk scratch space for column matrices and grouped outputs.
func (g *convGeom) forward(y, x, w, bias []float32, nb int, cols, outs *scratch) {
	k, size, _ := g.scratchChunks(nb)
	cols.ensure(k, g.kdim*size*g.outPlane)
	if size > 1 {
		outs.ensure(k, g.cout*size*g.outPlane)
	}
	in := g.cin * g.h * g.w
	g.forEachGroup(nb, func(chunk, _, n0, cnt int, par bool) {
		ld := cnt * g.outPlane
		out := y[n0*g.cout*g.outPlane : (n0+1)*g.cout*g.outPlane]
		if cnt > 1 {
			out = outs.at(chunk, g.cout*ld)
		}
		beta := float32(0)
		if bias != nil {
			for c, bc := range bias {
				p := out[c*ld : (c+1)*ld]
				for i := range p {
					p[i] = bc
				}
			}
			beta = 1
		}
		// Overlapping rows pay only where the GEMM would copy the column matrix into packed
		// panels anyway: they make it pack from a third of the data, but it can no longer read B
		// in place.
		if cnt == 1 && g.rows != nil && fastKernel != nil && packsPlainB(fastKernel, g.cout, ld) {
			e := cols.at(chunk, g.cin*g.k*g.extent)
			g.shiftedPlanes(e, x[n0*in:(n0+1)*in])
			if gemmRows(g.cout, ld, g.kdim, 1, w, g.kdim, e, g.rows, beta, out, ld) {
				return
			}
		}
		col, _ := g.columns(cols.at(chunk, g.kdim*cnt*g.outPlane), x, n0, cnt, par)
		Sgemm(false, false, g.cout, ld, g.kdim, 1, w, g.kdim, col, ld, beta, out, ld, par)
		if cnt > 1 {
			scatter(y, out, g.cout, g.outPlane, n0, cnt)
		}
	})
}

// transposedGeom returns, for a stride-1 convolution with "same" padding (output as large as the
// input), the geometry of the convolution that computes its input gradient: dy (cout channels)
// convolved with the filters transposed (cout·k·k → cin) and flipped in both spatial axes, with
// the same padding. Its column matrix is made of copies, where col2im would add the columns of
// Wᵀ·dy into the image with a pass of read-modify-write per tap.
func (g *convGeom) transposedGeom() (convGeom, bool) {
	if g.stride != 1 || 2*g.pad != g.k-1 || g.direct {
		return convGeom{}, false
	}
	t, err := newConvGeom(g.cout, g.oh, g.ow, g.cin, g.k, 1, g.pad)
	return t, err == nil && t.oh == g.h && t.ow == g.w
}

// flipFilters sets wf (cin, cout, k, k) to the filters w (cout, cin, k, k) transposed and rotated
// by 180 degrees: wf[ci][co][t] = w[co][ci][k·k-1-t].
//
// It is a transpose of a cout×cin matrix of k·k-float filters, done in square tiles so that
// both the reads and the writes stay in a few runs of memory: the layers of VGG have millions of
// weights.
func (g *convGeom) flipFilters(wf, w []float32) {
	const tile = 16
	kk := g.k * g.k
	for o0 := 0; o0 < g.cout; o0 += tile {
		o1 := min(o0+tile, g.cout)
		for i0 := 0; i0 < g.cin; i0 += tile {
			i1 := min(i0+tile, g.cin)
			for ci := i0; ci < i1; ci++ {
				for co := o0; co < o1; co++ {
					src := w[(co*g.cin+ci)*kk:][:kk]
					dst := wf[(ci*g.cout+co)*kk:][:kk]
					for t, v := range src {
						dst[kk-1-t] = v
					}
				}
			}
		}
	}
}
