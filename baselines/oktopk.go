package baselines

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/pipeline"
)

// OkTopk is the Ok-Topk pipeline (Li and Hoefler, PPoPP 2022): a sparse allreduce whose
// traffic per worker stays O(k) as the number of workers P grows, where an allgather of
// every worker's top-k grows as O(kP).
//
// The gradient of all tensors, end to end in tensor-id order, is accumulated with error
// feedback as each tensor is pushed (as in ExDyna). When backward has ended (in Wait):
//
//  1. Local selection: every worker selects the accumulated elements whose magnitude
//     reaches its local threshold. The threshold is the exact k-th largest magnitude every
//     OkTopkThresholdPeriod steps; in between it is kept, and nudged by a small factor
//     when the selection strays far from k.
//  2. Sparse reduce-scatter: the index space is split into P regions; worker r sends the
//     selected (index, value) pairs of region j to worker j (one AllToAllV), and sums
//     what it receives for its own region, in rank order.
//  3. Global selection: worker j keeps the sums of its region that reach the global
//     threshold, which every worker holds alike; one AllGatherV gives every worker the
//     union, whose average lands in the tensors' Grad (zero elsewhere). Every
//     OkTopkThresholdPeriod steps the workers instead gather every sum and keep the
//     exact top k of them, whose smallest magnitude becomes the global threshold; in
//     between it moves by a small factor when the count strays far from k.
//  4. Error feedback: a worker clears its memory where it sent a value that made it into
//     the global selection; values it sent that did not stay in its memory.
//
// Every OkTopkRepartitionPeriod steps the region boundaries move so that the regions
// hold about as many selected elements each: every worker proposes the positions that
// cut its own selection into P equal parts, and the boundaries become the proposals'
// means (an allgather of P-1 integers each).
//
// Ours: the periods and nudging factors are the authors' code's: 32 steps for both
// thresholds, 64 for the regions; between exact steps the local threshold is first raised
// by 3% at a time, at most 5 times, while more than 4k/3 elements reach it, and after the
// selection moved by 1.2% when the count falls outside [2k/3, 5k/4]; the global one by
// 0.8% below 2k/3. Above 4k/3 the authors lower the global threshold by 0.8% too, which
// cannot keep up when the residuals grow: the global selection then grew to several times
// k between exact steps in our tests, and with it the allgather. So when more than 4k/3
// sums come, every worker keeps the top k of them, as in an exact step, and their
// smallest magnitude becomes the global threshold; the gathered traffic of that step is
// already spent, the next one's is back near k. The authors allreduce the boundary
// proposals as sums; we gather them so that the mean is exact for any model size. The
// selector named in cfg is not used: the thresholds are Ok-Topk's selection. A step whose
// density reaches 1 sends everything with one dense allreduce.
type OkTopk struct {
	flatGradient
	topk compress.TopK

	// Carried from step to step and checkpointed; 0 thresholds are found at the next step.
	localTh, globalTh float32
	bounds            []int // P+1 region boundaries in the flattened gradient

	// Scratch of one step.
	exact   bool      // the step finds the global threshold exactly
	gathers okGather  // what the allgather in flight carries
	local   []int32   // this worker's selection, ascending
	blocks  [][]byte  // by region: this worker's pairs for it
	reduced []float32 // the sums of this worker's region, by offset in it
	hit     []bool    // by offset in the region: some worker sent a value there
	touched []int32   // offsets with hit set
	msg     []byte
	sel     []int32   // the global selection, ascending
	vals    []float32 // its sums
	keys    []int32   // top-k scratch
}

// okGather names Ok-Topk's two allgathers, for MirrorMessage.
type okGather int

const (
	okGatherBounds okGather = iota
	okGatherSelection
)

// The authors' periods and nudging factors (see OkTopk).
const (
	OkTopkThresholdPeriod   = 32
	OkTopkRepartitionPeriod = 64
	okLocalNudge            = 1.012
	okGlobalNudge           = 1.008
	okRaise                 = 1.03
	okRaises                = 5
)

// NewOkTopk returns the Ok-Topk pipeline over comm.
func NewOkTopk(comm dist.Communicator, tensors []pipeline.Tensor, cfg compress.Config) (*OkTopk, error) {
	flat, err := newFlatGradient("oktopk", comm, tensors, cfg)
	if err != nil {
		return nil, err
	}
	p := comm.Size()
	return &OkTopk{flatGradient: flat, bounds: evenBounds(flat.numel(), p), blocks: make([][]byte, p)}, nil
}

// evenBounds splits n elements into p regions of equal length, give or take one.
func evenBounds(n, p int) []int {
	b := make([]int, p+1)
	for j := range b {
		b[j] = int(int64(n) * int64(j) / int64(p))
	}
	return b
}

// Wait implements pipeline.Pipeline: it runs the sparse allreduce of the step, or a
// dense one when the density reaches 1.
func (x *OkTopk) Wait() error {
	return x.runStep(func(step, k int) error {
		if k < x.numel() {
			return x.sparse(step, k)
		}
		return x.averageAll()
	})
}

// sparse runs the four stages of a sparse step (see OkTopk).
func (x *OkTopk) sparse(step, k int) error {
	n := x.numel()
	period := step%OkTopkThresholdPeriod == 0
	start := x.clock.Now()
	var selected time.Duration
	if period || x.localTh == 0 {
		x.localTh = x.kthMagnitude(x.flat, k)
		selected = x.clock.Work(start, "topk", n)
		start = x.clock.Now()
	} else {
		// A kept threshold lets ever more through while the residuals grow: raise it
		// by steps while it would let through more than 4k/3.
		for range okRaises {
			if compress.CountAtLeast(x.flat, x.localTh) <= 4*k/3 {
				break
			}
			x.localTh *= okRaise
			selected += x.clock.Work(start, compress.ThresholdKind, n)
			start = x.clock.Now()
		}
	}
	x.local = compress.AppendIndicesAtLeast(x.local[:0], x.flat, x.localTh)
	selected += x.clock.Work(start, compress.ThresholdKind, n)
	x.localTh = nudge(x.localTh, len(x.local), k, 2*float64(k)/3, 5*float64(k)/4, okLocalNudge)

	if step%OkTopkRepartitionPeriod == 0 {
		if err := x.repartition(); err != nil {
			return err
		}
	}
	x.fillBlocks()
	got, err := x.gatherer.AllToAllV(x.blocks) // read by reduce before the next collective reuses the buffer
	if err != nil {
		return fmt.Errorf("oktopk: sparse reduce-scatter: %w", err)
	}
	start = x.clock.Now()
	if err := x.reduce(got); err != nil {
		return err
	}
	x.exact = period || x.globalTh == 0
	x.msg = x.regionMessage(x.msg[:0], x.comm.Rank(), nil)
	selected += x.clock.Since(start)
	x.gathers = okGatherSelection
	msgs, err := x.gatherer.AllGatherV(x.msg)
	if err != nil {
		return fmt.Errorf("oktopk: allgather of the reduced selection: %w", err)
	}
	start = x.clock.Now()
	if err := x.gather(msgs, k); err != nil {
		return err
	}
	missing, err := x.finish()
	if err != nil {
		return err
	}
	selected += x.clock.Since(start)
	x.meter.Selected(selected, len(x.sel), missing)
	return nil
}

// kthMagnitude is the exact k-th largest magnitude of g (k <= len(g)).
func (x *OkTopk) kthMagnitude(g []float32, k int) float32 {
	idx, err := x.topk.Select(g, k, x.keys[:0])
	x.keys = idx
	if err != nil || len(idx) == 0 {
		return float32(math.Inf(1)) // g is finite (Push checks it), so err cannot happen
	}
	th := float32(math.Inf(1))
	for _, i := range idx {
		th = min(th, abs32(g[i]))
	}
	if th == 0 {
		// Fewer than k non-zero elements: select the non-zero ones.
		th = math.SmallestNonzeroFloat32
	}
	return th
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// nudge moves a threshold by factor when count falls outside [lo, hi] for a target k:
// down when too few elements reached it, up when too many.
func nudge(th float32, count, k int, lo, hi, factor float64) float32 {
	switch {
	case float64(count) < lo:
		return float32(float64(th) / factor)
	case float64(count) > hi:
		return float32(float64(th) * factor)
	}
	return th
}

// repartition moves the region boundaries to the means of every worker's proposal: the
// positions that cut its selection into P equal parts.
func (x *OkTopk) repartition() error {
	p, n := x.comm.Size(), x.numel()
	if p == 1 {
		return nil
	}
	mine := make([]int32, p-1)
	for j := 1; j < p; j++ {
		if len(x.local) >= p {
			mine[j-1] = x.local[len(x.local)/p*j]
		} else {
			mine[j-1] = int32(x.bounds[j])
		}
	}
	x.gathers = okGatherBounds
	all, err := dist.AllGatherInt32(x.comm, mine)
	if err != nil {
		return fmt.Errorf("oktopk: allgather of the region boundaries: %w", err)
	}
	bounds := make([]int, p+1)
	bounds[p] = n
	for j := 1; j < p; j++ {
		var sum int64
		for r, b := range all {
			if len(b) != p-1 || b[j-1] < 0 || int(b[j-1]) > n {
				return fmt.Errorf("oktopk: rank %d proposed region boundaries %v for %d elements in %d regions", r, b, n, p)
			}
			sum += int64(b[j-1])
		}
		bounds[j] = max(bounds[j-1], int(sum/int64(p)))
	}
	x.bounds = bounds
	return nil
}

// The pairs a worker sends to a region's owner are (u32 offset in the region, f32 value),
// little-endian, offsets ascending, pairBytes each; the messages of the global selection
// are as appendParts reads them, with absolute indices.

// fillBlocks encodes this worker's selection by region.
func (x *OkTopk) fillBlocks() {
	j := 0
	for r := range x.blocks {
		x.blocks[r] = x.blocks[r][:0]
	}
	for _, i := range x.local {
		for int(i) >= x.bounds[j+1] {
			j++
		}
		b := binary.LittleEndian.AppendUint32(x.blocks[j], uint32(int(i)-x.bounds[j]))
		x.blocks[j] = binary.LittleEndian.AppendUint32(b, math.Float32bits(x.flat[i]))
	}
}

// reduce sums, in rank order, the pairs every worker sent for this worker's region.
func (x *OkTopk) reduce(got [][]byte) error {
	r := x.comm.Rank()
	// The last step's offsets index the last step's region, which a repartition may
	// have shrunk since: clear them first.
	for _, o := range x.touched {
		x.reduced[o], x.hit[o] = 0, false
	}
	x.touched = x.touched[:0]
	width := x.bounds[r+1] - x.bounds[r]
	if cap(x.reduced) < width {
		x.reduced = make([]float32, width)
		x.hit = make([]bool, width)
	}
	x.reduced, x.hit = x.reduced[:width], x.hit[:width]
	for p, b := range got {
		if len(b)%pairBytes != 0 {
			return fmt.Errorf("oktopk: rank %d sent %d bytes for region %d, not whole pairs", p, len(b), r)
		}
		prev := -1
		for i := 0; i < len(b); i += pairBytes {
			o := int(binary.LittleEndian.Uint32(b[i:]))
			v := math.Float32frombits(binary.LittleEndian.Uint32(b[i+4:]))
			if o <= prev || o >= width || !compress.Finite(v) {
				return fmt.Errorf("oktopk: rank %d sent element %d = %g for region %d of %d elements (after %d)", p, o, v, r, width, prev)
			}
			prev = o
			if !x.hit[o] {
				x.hit[o] = true
				x.touched = append(x.touched, int32(o))
			}
			x.reduced[o] += v
		}
	}
	slices.Sort(x.touched)
	return nil
}

// regionMessage appends region j's part of the global selection: every sum of the region
// in an exact step, else those that reach the global threshold. sums gives the sum at an
// offset of the region with the reach (-1: none); nil reads this worker's reduction.
func (x *OkTopk) regionMessage(dst []byte, j int, sums func(yield func(o int32, v float32))) []byte {
	if sums == nil {
		sums = func(yield func(o int32, v float32)) {
			for _, o := range x.touched {
				yield(o, x.reduced[o])
			}
		}
	}
	key := math.Float32bits(x.globalTh)
	base := x.bounds[j]
	sums(func(o int32, v float32) {
		if x.exact || math.Float32bits(v)&^(1<<31) >= key {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(base+int(o)))
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
		}
	})
	return dst
}

// MirrorMessage returns the allgather message rank would send in this step if every
// worker held this one's gradient: the same boundary proposals, and for its region's part
// of the global selection P times this worker's values where it selected. A lone
// simulated rank stands for identical ranks this way.
func (x *OkTopk) MirrorMessage(own []byte, rank int) []byte {
	if x.gathers == okGatherBounds {
		return own
	}
	p := float32(x.comm.Size())
	lo, hi := x.bounds[rank], x.bounds[rank+1]
	from, _ := slices.BinarySearch(x.local, int32(lo))
	return x.regionMessage(nil, rank, func(yield func(o int32, v float32)) {
		for _, i := range x.local[from:] {
			if int(i) >= hi {
				return
			}
			yield(i-int32(lo), p*x.flat[i])
		}
	})
}

// gather decodes every region's part of the global selection, keeps the top k of them in
// an exact step or when more than 4k/3 came, and moves the global threshold on. Every worker holds the same messages,
// so all reach the same selection and threshold.
func (x *OkTopk) gather(msgs [][]byte, k int) error {
	var err error
	if x.sel, x.vals, err = x.appendParts(x.sel[:0], x.vals[:0], msgs, x.bounds); err != nil {
		return err
	}
	if !x.exact && 3*len(x.sel) <= 4*k {
		x.globalTh = nudge(x.globalTh, len(x.sel), k, 2*float64(k)/3, 4*float64(k)/3, okGlobalNudge)
		return nil
	}
	if len(x.sel) > k {
		keep, err := x.topk.Select(x.vals, k, x.keys[:0])
		if err != nil {
			return fmt.Errorf("oktopk: global top-k: %w", err)
		}
		x.keys = keep
		for j, i := range keep { // ascending positions: the selection stays ascending
			x.sel[j], x.vals[j] = x.sel[i], x.vals[i]
		}
		x.sel, x.vals = x.sel[:len(keep)], x.vals[:len(keep)]
	}
	th := float32(math.Inf(1))
	for _, v := range x.vals {
		th = min(th, abs32(v))
	}
	if len(x.vals) == 0 || th == 0 {
		th = math.SmallestNonzeroFloat32
	}
	x.globalTh = th
	return nil
}

// finish writes the average of the global selection into the tensors' Grad (zero
// elsewhere) and clears this worker's memory where its values made it into the
// selection. It returns the number of tensors the selection left out.
func (x *OkTopk) finish() (missing int, err error) {
	missing = x.averageAt(x.sel, x.vals)
	s, l := 0, 0 // cursors into x.sel and x.local, both ascending
	var sent []int32
	for id := range x.tensors {
		lo, hi := x.offsets[id], x.offsets[id+1]
		sent = sent[:0]
		for ; s < len(x.sel) && int(x.sel[s]) < hi; s++ {
			i := x.sel[s]
			for l < len(x.local) && x.local[l] < i {
				l++
			}
			if l < len(x.local) && x.local[l] == i {
				sent = append(sent, i-int32(lo))
			}
		}
		if err := x.mem.Sent(id, sent); err != nil {
			return 0, err
		}
	}
	return missing, nil
}

// The checkpointed state, little-endian:
//
//	u32 version, u64 elements N, u32 regions P, f32 local threshold, f32 global threshold,
//	(P+1) × u32 region boundaries
const okStateVersion = 1

func (x *OkTopk) extraState() []byte {
	b := binary.LittleEndian.AppendUint32(nil, okStateVersion)
	b = binary.LittleEndian.AppendUint64(b, uint64(x.numel()))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(x.bounds)-1))
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x.localTh))
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x.globalTh))
	for _, v := range x.bounds {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b
}

// restoreExtra checks an encoded state against this pipeline and adopts it; on error
// nothing changes.
func (x *OkTopk) restoreExtra(b []byte) error {
	const head = 4 + 8 + 4 + 4 + 4
	p := len(x.bounds) - 1
	if len(b) >= 4 {
		if v := binary.LittleEndian.Uint32(b); v != okStateVersion {
			return fmt.Errorf("oktopk: saved state has version %d, this build reads %d", v, okStateVersion)
		}
	}
	if want := head + 4*(p+1); len(b) != want {
		return fmt.Errorf("oktopk: saved thresholds and regions take %d bytes, %d ranks need %d (state of another pipeline or world size?)", len(b), p, want)
	}
	if n := binary.LittleEndian.Uint64(b[4:]); n != uint64(x.numel()) {
		return fmt.Errorf("oktopk: saved state is for %d gradient elements, the model has %d", n, x.numel())
	}
	if got := binary.LittleEndian.Uint32(b[12:]); got != uint32(p) {
		return fmt.Errorf("oktopk: saved state has %d regions, the world has %d ranks", got, p)
	}
	local := math.Float32frombits(binary.LittleEndian.Uint32(b[16:]))
	global := math.Float32frombits(binary.LittleEndian.Uint32(b[20:]))
	for _, th := range []float32{local, global} {
		if !(th >= 0) || math.IsInf(float64(th), 0) {
			return fmt.Errorf("oktopk: saved threshold %g is not a finite non-negative number", th)
		}
	}
	bounds := make([]int, p+1)
	for j := range bounds {
		bounds[j] = int(binary.LittleEndian.Uint32(b[head+4*j:]))
		if j > 0 && bounds[j] < bounds[j-1] {
			return fmt.Errorf("oktopk: saved region %d ends at %d before it starts at %d", j-1, bounds[j], bounds[j-1])
		}
	}
	if bounds[0] != 0 || bounds[p] != x.numel() {
		return fmt.Errorf("oktopk: saved regions span %d to %d, want 0 to %d", bounds[0], bounds[p], x.numel())
	}
	x.localTh, x.globalTh, x.bounds = local, global, bounds
	return nil
}

// State implements pipeline.Stateful: the step count, the error-feedback memory, and the
// thresholds with the region boundaries in Extra.
func (x *OkTopk) State() (pipeline.State, error) { return x.state(x.extraState()), nil }

// Restore implements pipeline.Stateful.
func (x *OkTopk) Restore(st pipeline.State) error {
	return x.restore(st, x.extraState, x.restoreExtra)
}
