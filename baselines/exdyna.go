package baselines

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/pipeline"
)

// ExDyna is the ExDyna pipeline (Kim et al., CCGrid 2024, arXiv 2402.13781): gradient
// sparsification over the whole flattened gradient with exclusive, rotating partitions, one
// threshold for all of them that follows the target density, and partition boundaries that
// move to balance the workers' loads.
//
// The gradient of all tensors, laid end to end in tensor-id order (the parameter order every
// rank shares, independent of the backprop order), is accumulated with error feedback (and
// DGC's momentum correction when cfg.Momentum > 0; without error feedback, when
// cfg.NoErrorFeedback, each step starts from its own gradient) as each tensor is pushed. It
// is cut into up to exdynaBlocks blocks, and contiguous runs of blocks form one partition
// per worker. When backward has ended (in Wait), worker r selects in step s the elements of
// partition (s+r) mod P whose accumulated magnitude reaches a threshold
// (compress.AppendAtLeast): the common tau under the paper's rule, or by default its
// estimate of its partition's share of the common threshold (see below). So the workers'
// selections never overlap and their union has no duplicates. One allgather
// per step exchanges the selected indices; every worker then allreduces its own accumulated
// values at the union of indices, and the average lands in the tensors' Grad (zero
// elsewhere). Every worker clears its memory at every index of the union, since every
// worker sent its value there.
//
// After each step all ranks update tau, the partitions' shares and the partition boundaries
// from the allgathered counts and histograms alone, so they agree bit for bit; all three
// are part of the checkpointed state. The boundaries move toward equal counts, the step's
// mean per partition, as the authors' code has it.
//
// The default threshold is our own. The paper starts tau at 1/(2 sqrt(k)), which knows
// nothing of the gradients' scale, and moves it by at most half a percent a step, so the
// density stays far off the target for tens to hundreds of steps; error feedback makes it
// worse, since while the residuals build up the magnitude at the target density grows
// faster than any rule of small steps follows. So by default the common threshold is
// measured in every step, with no collective added.
//
// Each partition j has a share f_j of the k elements (1/P at first), apportioned into
// whole numbers, its quota, that add up to k. Worker r estimates from a sample of its
// partition (compress.KthEstimator) the magnitude of the quota-th largest accumulated
// element, selects at that estimate (of the elements tied at it, only as many as the
// quota needs), and puts its sample's histogram of magnitudes in its allgather message.
// Afterwards every rank finds, from all the histograms together, the common threshold
// tau that k elements reach (compress.ThresholdFor), and sets each share f_j to the part
// of those k elements that partition j holds (compress.Histogram.Above). So each step
// selects about k elements where one common threshold would have (the shares are one
// step old; the levels are the step's own), and the boundaries move to even out the
// partitions' loads. Under error feedback the shares lag more than a step's drift: they
// favour the partition whose largest elements the step before selected and cleared, so a
// partition can take nearly all of k in one step and little in the next. The number
// selected holds; only the loads differ more than under the paper's common threshold.
// ExDynaPaperThreshold restores the paper's start and rule.
//
// ExDyna sends one message per step whatever the fusion buffers, so it is not built on the
// fusion engine but on one flat memory (flatGradient, shared with Ok-Topk). It takes no
// selector: its threshold is its own selection. A step whose density reaches 1 (k >= N)
// sends everything with one dense allreduce and leaves tau and the partitions as they are.
//
// Metrics: besides the shared figures, each step reports pipeline.PartitionImbalance, the
// largest partition's selected count over the mean, and the bytes of this rank's index
// message in our encoding and in the authors' (ExDynaIndexBytes, ExDynaAuthorsIndexBytes).
type ExDyna struct {
	flatGradient

	// Carried from step to step and checkpointed.
	tau    float64 // 0 until the first step that selects by threshold
	topo   *exTopology
	shares []float64 // by partition: its share of k, when measuring (see ExDyna)

	paper bool                  // see ExDynaPaperThreshold
	kth   compress.KthEstimator // measures the thresholds

	// Scratch of one step.
	hists    []compress.Histogram // by partition: its worker's sample, when measuring
	send     []byte
	union    []int32
	vals     []float32
	local    []int32
	ranges   []int // by tensor id: the tensor's union entries are union[ranges[id]:ranges[id+1]]
	counts   []int
	observed func(exStep)
}

// An ExDynaOption changes how NewExDyna's pipeline runs.
type ExDynaOption func(*ExDyna)

// ExDynaPaperThreshold runs the threshold as the paper does: one threshold for all
// workers that starts at 1/(2 sqrt(k)), which knows nothing of the gradients' scale, and
// moves by small factors only, so it takes tens to hundreds of steps to reach the target
// density and meanwhile the pipeline sends another. By default the threshold is measured
// in every step instead (see ExDyna).
func ExDynaPaperThreshold() ExDynaOption { return func(x *ExDyna) { x.paper = true } }

// NewExDyna returns the ExDyna pipeline over comm.
func NewExDyna(comm dist.Communicator, tensors []pipeline.Tensor, cfg compress.Config, opts ...ExDynaOption) (*ExDyna, error) {
	flat, err := newFlatGradient("exdyna", comm, tensors, cfg)
	if err != nil {
		return nil, err
	}
	p := comm.Size()
	x := &ExDyna{
		flatGradient: flat,
		topo:         newExTopology(newExBlocks(flat.numel()), p),
		ranges:       make([]int, len(tensors)+1),
		counts:       make([]int, p), hists: make([]compress.Histogram, p), shares: make([]float64, p),
	}
	for j := range x.shares {
		x.shares[j] = 1 / float64(p)
	}
	for _, o := range opts {
		o(x)
	}
	return x, nil
}

// Wait implements pipeline.Pipeline: it selects, exchanges and averages the step's
// gradient.
func (x *ExDyna) Wait() error {
	return x.runStep(func(step, k int) error {
		if k >= x.numel() {
			return x.dense()
		}
		if err := x.sparse(step, k); err != nil {
			return err
		}
		x.finish()
		return nil
	})
}

// MirrorMessage returns the allgather message rank would send in this step if its
// accumulated gradient were this rank's (own is this rank's message): its partition
// scanned with the same threshold. That is exact for identical ranks, whose residuals stay
// identical since everyone clears the same union. A simulated rank standing for many
// identical ones needs it: its own message, repeated, would name the wrong partitions, and
// the union, and so the allreduce that follows, would be one rank's share instead of
// everyone's.
func (x *ExDyna) MirrorMessage(own []byte, rank int) []byte {
	if len(own) < exHeaderBytes {
		return own // formUnion reports it
	}
	step := binary.LittleEndian.Uint64(own)
	part := int((step + uint64(rank)) % uint64(len(x.counts)))
	msg, _ := x.appendSelection(nil, step, part, compress.KFor(x.numel(), x.cfg.DensityAt(int(step))))
	return msg
}

// The names of ExDyna's figures in pipeline.StepMetrics.Extra: the bytes of the index
// message this rank allgathers in a sparse step, in our encoding (a header, the
// histogram, and its count of uint32 indices), and in the authors' code's, which sends
// int64 indices padded to the largest count of the step so that every rank's message has
// one size.
const (
	ExDynaIndexBytes        = pipeline.IndexBytes
	ExDynaAuthorsIndexBytes = pipeline.AuthorsIndexBytes
)

// The constants of the algorithm, as the ExDyna paper and its authors' code give them.
const (
	exdynaBlocks    = 1024 // blocks the flattened gradient is cut into
	exdynaBlockUnit = 32   // block sizes are multiples of this
	exdynaMinShare  = 4    // a partition keeps at least blocks/(4P) blocks

	// Threshold scaling on the ratio of selected to target elements: above exdynaTooMany
	// tau rises by exdynaUp, at or below exdynaTooFew it falls by exdynaDown, and in between
	// it rises gently by exdynaGentle, as the paper and the authors' code have it. The gentle
	// rise keeps nudging the density down until it crosses exdynaTooFew, so the density
	// settles a little below the target rather than on it.
	exdynaTooMany = 1.1
	exdynaTooFew  = 0.909
	exdynaUp      = 1.005
	exdynaDown    = 0.995
	exdynaGentle  = 1.00125

	// Partition topology: a partition above exdynaOver times its target gives one boundary
	// block to a neighbour below exdynaUnder times it.
	exdynaOver  = 1.05
	exdynaUnder = 0.952
)

// exBlocks cuts n elements into blocks: count blocks of size elements, the last one also
// taking the remainder. The size is n/1024 rounded down to a multiple of 32, but at least 32;
// a gradient too small for 1024 blocks of 32 gets n/32 blocks (at least one), so no block is
// ever empty. n = 0 has no blocks.
type exBlocks struct{ n, size, count int }

func newExBlocks(n int) exBlocks {
	if n <= 0 {
		return exBlocks{}
	}
	size := max(exdynaBlockUnit, n/exdynaBlocks/exdynaBlockUnit*exdynaBlockUnit)
	return exBlocks{n: n, size: size, count: min(exdynaBlocks, max(1, n/size))}
}

// start is the first element of block b; start(count) is n.
func (b exBlocks) start(i int) int {
	if i >= b.count {
		return b.n
	}
	return i * b.size
}

// exTopology is the partition of the blocks among P workers: partition j holds blocks
// [bounds[j], bounds[j+1]).
type exTopology struct {
	blocks    exBlocks
	bounds    []int // P+1 block indices, non-decreasing, from 0 to blocks.count
	minBlocks int   // no move takes a partition below this many blocks
}

// newExTopology spreads the blocks evenly over p partitions, the first ones taking one more
// block when they do not divide. With fewer blocks than partitions, the last partitions are
// empty and their workers select nothing in the steps they hold them.
func newExTopology(blocks exBlocks, p int) *exTopology {
	t := &exTopology{blocks: blocks, bounds: make([]int, p+1), minBlocks: max(1, blocks.count/(exdynaMinShare*p))}
	q, rem := blocks.count/p, blocks.count%p
	for j := range p {
		n := q
		if j < rem {
			n++
		}
		t.bounds[j+1] = t.bounds[j] + n
	}
	return t
}

// span is partition j's element range [lo, hi).
func (t *exTopology) span(j int) (lo, hi int) {
	return t.blocks.start(t.bounds[j]), t.blocks.start(t.bounds[j+1])
}

// rebalance moves boundary blocks after a step in which partition j had counts[j] elements
// selected, against a per-partition target. Adjacent pairs are visited left to right; a
// partition above exdynaOver times the target gives its boundary block to a neighbour below
// exdynaUnder times it, unless that would leave it with fewer than minBlocks. inBlock(b)
// counts the step's selected elements in block b, so that later pairs see the counts as they
// would have been with the block already moved. counts is modified. Every rank calls it with
// the same arguments and gets the same boundaries.
func (t *exTopology) rebalance(counts []int, target float64, inBlock func(b int) int) {
	over := func(c int) bool { return float64(c) > exdynaOver*target }
	under := func(c int) bool { return float64(c) < exdynaUnder*target }
	size := func(j int) int { return t.bounds[j+1] - t.bounds[j] }
	for j := 0; j+1 < len(counts); j++ {
		switch {
		case over(counts[j]) && under(counts[j+1]) && size(j) > t.minBlocks:
			t.bounds[j+1]--
			m := inBlock(t.bounds[j+1])
			counts[j] -= m
			counts[j+1] += m
		case under(counts[j]) && over(counts[j+1]) && size(j+1) > t.minBlocks:
			m := inBlock(t.bounds[j+1])
			t.bounds[j+1]++
			counts[j] += m
			counts[j+1] -= m
		}
	}
}

// exStep is what one step did, for tests.
type exStep struct {
	Step   int
	Union  []int32   // selected indices into the flattened gradient, ascending
	Counts []int     // selected per partition
	Bounds []int     // partition boundaries the step selected in
	Tau    float64   // threshold the step selected with (paper), or the one the step before found (measured)
	Shares []float64 // by partition: its share of k the step selected with (measured)
}

// dense averages every accumulated element into the gradients.
func (x *ExDyna) dense() error {
	if err := x.averageAll(); err != nil {
		return err
	}
	x.meter.SetExtra(pipeline.PartitionImbalance, x.imbalanceOfSpans())
	return nil
}

// imbalanceOfSpans is the imbalance of a step that sends everything: every partition's
// whole span.
func (x *ExDyna) imbalanceOfSpans() float64 {
	for j := range x.counts {
		lo, hi := x.topo.span(j)
		x.counts[j] = hi - lo
	}
	return imbalance(x.counts)
}

// imbalance is the largest count over the mean count; 0 when nothing was selected.
func imbalance(counts []int) float64 {
	total, most := 0, 0
	for _, c := range counts {
		total += c
		most = max(most, c)
	}
	if total == 0 {
		return 0
	}
	return float64(most) * float64(len(counts)) / float64(total)
}

// The message each worker allgathers, little-endian:
//
//	u64 step, u32 partition, u32 count, u32 bins H, u32 first bin, f64 weight,
//	H × u32 histogram counts, count × u32 index into the flattened gradient
//
// Under the measured threshold (the default) the histogram is the worker's sample of its
// partition (see compress.Histogram); under the paper's, H and the weight are 0. Indices are
// ascending and inside the partition; the receiver checks all of it, and the step and
// partition tell it whether the ranks agree on where they are.
const exHeaderBytes = 32

// sparse selects this worker's share, allgathers it, forms the union of the gathered
// indices, allreduces this worker's values there, clears them from the memory, and moves
// tau and the partitions on for the next step.
func (x *ExDyna) sparse(step, k int) error {
	if x.tau == 0 && x.paper {
		x.tau = paperStart(k)
	}
	p := x.comm.Size()
	part := (step + x.comm.Rank()) % p
	lo, hi := x.topo.span(part)
	start := x.clock.Now()
	var sampled int
	x.send, sampled = x.appendSelection(x.send[:0], uint64(step), part, k)
	// The clock charges the scan and a top-k over the sample.
	selected := x.clock.Work(start, compress.ThresholdKind, hi-lo)
	if sampled > 0 {
		selected += x.clock.Work(x.clock.Now(), "topk", sampled)
	}
	msgs, err := x.gatherer.AllGatherV(x.send)
	if err != nil {
		return fmt.Errorf("exdyna: allgather of the selected indices: %w", err)
	}
	start = x.clock.Now()
	if err := x.formUnion(msgs, step); err != nil {
		return err
	}
	x.vals = x.vals[:0]
	for _, i := range x.union {
		v := x.flat[i]
		if !compress.Finite(v) {
			return fmt.Errorf("exdyna: accumulated gradient element %d overflowed: %w", i, &compress.NonFiniteError{Index: int(i), Value: v})
		}
		x.vals = append(x.vals, v)
	}
	missing := x.splitByTensor()
	selected += x.clock.Since(start)
	if len(x.vals) > 0 { // every rank holds the same union, so all skip together
		if err := x.comm.AllReduce(x.vals, dist.Sum); err != nil {
			return fmt.Errorf("exdyna: allreduce of %d selected values: %w", len(x.vals), err)
		}
	}
	for id := range x.tensors {
		lo, hi := x.ranges[id], x.ranges[id+1]
		if err := x.mem.Sent(id, x.localIndices(id, lo, hi)); err != nil {
			return err
		}
	}
	x.meter.Selected(selected, len(x.union), missing)
	x.meter.SetExtra(pipeline.PartitionImbalance, imbalance(x.counts))
	x.meter.SetExtra(ExDynaIndexBytes, float64(len(x.send)))
	x.meter.SetExtra(ExDynaAuthorsIndexBytes, float64(8*slices.Max(x.counts)))
	if x.observed != nil {
		x.observed(exStep{Step: step, Union: slices.Clone(x.union), Counts: slices.Clone(x.counts),
			Bounds: slices.Clone(x.topo.bounds), Tau: x.tau, Shares: x.observedShares()})
	}
	x.adapt(k)
	return nil
}

// paperStart is where the paper starts tau for a target of k elements.
func paperStart(k int) float64 { return 1 / (2 * math.Sqrt(float64(k))) }

// appendSelection appends to dst the message of a worker selecting in partition part of
// step, whose target is k elements over all partitions: the indices whose accumulated
// magnitude reaches tau, or when measuring the histogram of its sample and the indices
// that reach its estimate of the magnitude of the partition's quota of k (every non-zero
// one when fewer are non-zero, none when its quota is none), less those tied at the
// estimate that would take it past its quota. It also returns how many elements the
// measurement sampled. float32(tau) may round, identically on every rank.
func (x *ExDyna) appendSelection(dst []byte, step uint64, part, k int) ([]byte, int) {
	lo, hi := x.topo.span(part)
	tau, sampled := float32(x.tau), 0
	share := 0
	var h compress.Histogram
	if !x.paper {
		share = x.quota(part, k)
		if share > 0 {
			tau, sampled = x.kth.Estimate(x.flat[lo:hi], share)
			tau = max(tau, math.SmallestNonzeroFloat32)
		} else {
			// Nothing to select, but the histogram must still show what the partition
			// holds, in case it grows: sample it as if it had its fair share.
			_, sampled = x.kth.Estimate(x.flat[lo:hi], max(1, k*(hi-lo)/x.numel()))
			tau = float32(math.Inf(1))
		}
		h = x.kth.Histogram(x.flat[lo:hi], x.hists[part].Counts)
		x.hists[part].Counts = h.Counts // keep the scratch space
	}
	dst = binary.LittleEndian.AppendUint64(dst, step)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(part))
	dst = binary.LittleEndian.AppendUint32(dst, 0) // count, filled in below
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(h.Counts)))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(h.First))
	dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(h.Weight))
	for _, c := range h.Counts {
		dst = binary.LittleEndian.AppendUint32(dst, c)
	}
	body := len(dst)
	dst = compress.AppendAtLeast(dst, x.flat[lo:hi], lo, tau)
	if share > 0 {
		dst = dst[:body+len(x.dropTies(dst[body:], share, tau))]
	}
	binary.LittleEndian.PutUint32(dst[12:], uint32((len(dst)-body)/4))
	return dst, sampled
}

// quota is partition part's whole number of the k elements when measuring: the shares
// apportioned by largest remainder (the lower partition first among equal ones), so that
// the quotas add up to k. Rounding each share alone would not: with k of the order of the
// number of partitions, every share of k can round up, or every one down. Every rank
// computes the same quotas from the same shares.
func (x *ExDyna) quota(part, k int) int {
	split := func(j int) (int, float64) {
		q := x.shares[j] * float64(k)
		return int(q), q - math.Floor(q)
	}
	left := k
	for j := range x.shares {
		n, _ := split(j)
		left -= n
	}
	// The remaining elements go one each to the partitions of the largest remainders.
	mine, rem := split(part)
	before := 0
	for j := range x.shares {
		if _, f := split(j); f > rem || (f == rem && j < part) {
			before++
		}
	}
	if rem > 0 && before < left {
		return mine + 1
	}
	return mine
}

// dropTies returns sel, little-endian uint32 indices into the flattened gradient whose
// magnitudes reach tau, with as many of those exactly at tau removed, the last first, as
// it takes to come down to want. A measured tau is the magnitude of one element, and a
// constant input (the normalised background of images) gives whole groups of elements
// one magnitude, step after step under error feedback; selecting every element tied at
// tau would send several times the target. The tied elements left out keep their memory
// for a later step. sel is modified.
func (x *ExDyna) dropTies(sel []byte, want int, tau float32) []byte {
	excess := len(sel)/4 - want
	if excess <= 0 {
		return sel
	}
	key := math.Float32bits(tau)
	tied := func(b []byte) bool {
		return math.Float32bits(x.flat[binary.LittleEndian.Uint32(b)])&^(1<<31) == key
	}
	ties := 0
	for b := sel; len(b) > 0; b = b[4:] {
		if tied(b) {
			ties++
		}
	}
	keep := ties - min(ties, excess)
	out := sel[:0]
	for b := sel; len(b) > 0; b = b[4:] {
		if tied(b) {
			if keep == 0 {
				continue
			}
			keep--
		}
		out = append(out, b[:4]...)
	}
	return out
}

// formUnion checks every rank's message and concatenates their indices in partition order,
// which is ascending order: partitions are contiguous and exclusive. It records each
// partition's count and histogram.
func (x *ExDyna) formUnion(msgs [][]byte, step int) error {
	p := len(x.counts)
	if len(msgs) != p {
		return fmt.Errorf("exdyna: allgather returned %d messages for %d ranks", len(msgs), p)
	}
	x.union = x.union[:0]
	for j := range p {
		r := ((j-step)%p + p) % p // the rank that selected in partition j this step
		msg := msgs[r]
		if len(msg) < exHeaderBytes {
			return fmt.Errorf("exdyna: message of rank %d has %d bytes, the header needs %d", r, len(msg), exHeaderBytes)
		}
		gotStep := binary.LittleEndian.Uint64(msg)
		gotPart := binary.LittleEndian.Uint32(msg[8:])
		count := uint64(binary.LittleEndian.Uint32(msg[12:]))
		bins := uint64(binary.LittleEndian.Uint32(msg[16:]))
		if gotStep != uint64(step) || gotPart != uint32(j) {
			return fmt.Errorf("exdyna: rank %d selected in partition %d of step %d, this rank expected partition %d of step %d", r, gotPart, gotStep, j, step)
		}
		if body := uint64(len(msg) - exHeaderBytes); body != 4*(bins+count) {
			return fmt.Errorf("exdyna: message of rank %d announces %d histogram bins and %d indices in %d bytes", r, bins, count, body)
		}
		if err := x.readHistogram(r, j, msg); err != nil {
			return err
		}
		lo, hi := x.topo.span(j)
		prev := lo - 1
		for b := msg[exHeaderBytes+4*bins:]; len(b) > 0; b = b[4:] {
			i := int(binary.LittleEndian.Uint32(b))
			if i <= prev || i >= hi {
				return fmt.Errorf("exdyna: rank %d sent index %d, outside partition %d [%d, %d) or not ascending", r, i, j, lo, hi)
			}
			prev = i
			x.union = append(x.union, int32(i))
		}
		x.counts[j] = int(count)
	}
	return nil
}

// readHistogram checks the histogram in rank r's message for partition j, whose length
// formUnion has checked, and keeps it: none under the paper's threshold, otherwise bins
// within range with a weight (elements per sampled element) between 1 and the partition's
// length, or none at all for an empty partition.
func (x *ExDyna) readHistogram(r, j int, msg []byte) error {
	bins := int(binary.LittleEndian.Uint32(msg[16:]))
	first := int(binary.LittleEndian.Uint32(msg[20:]))
	weight := math.Float64frombits(binary.LittleEndian.Uint64(msg[24:]))
	switch {
	case x.paper && (bins != 0 || weight != 0):
		return fmt.Errorf("exdyna: rank %d sent a histogram of %d bins, this rank runs the paper's threshold, which sends none", r, bins)
	case first+bins > compress.HistogramBins:
		return fmt.Errorf("exdyna: rank %d sent histogram bins %d to %d, there are %d", r, first, first+bins, compress.HistogramBins)
	case bins == 0 && weight != 0:
		return fmt.Errorf("exdyna: rank %d sent an empty histogram of weight %g", r, weight)
	case bins > 0 && !(weight >= 1 && weight <= float64(x.partLen(j))):
		return fmt.Errorf("exdyna: rank %d sent a histogram of weight %g for partition %d of %d elements, want a weight in [1, %d]", r, weight, j, x.partLen(j), x.partLen(j))
	}
	h := &x.hists[j]
	h.First, h.Weight, h.Counts = first, weight, h.Counts[:0]
	for b := msg[exHeaderBytes : exHeaderBytes+4*bins]; len(b) > 0; b = b[4:] {
		h.Counts = append(h.Counts, binary.LittleEndian.Uint32(b))
	}
	return nil
}

// splitByTensor finds each tensor's run of the (ascending) union and counts the non-empty
// tensors without any element in it.
func (x *ExDyna) splitByTensor() (missing int) {
	j := 0
	for id := range x.tensors {
		x.ranges[id] = j
		for j < len(x.union) && int(x.union[j]) < x.offsets[id+1] {
			j++
		}
		missing += compress.Missing(len(x.tensors[id].Grad), j-x.ranges[id])
	}
	x.ranges[len(x.tensors)] = j
	return missing
}

// localIndices returns union[lo:hi], which falls in tensor id, as indices into the tensor.
func (x *ExDyna) localIndices(id, lo, hi int) []int32 {
	x.local = x.local[:0]
	off := int32(x.offsets[id])
	for _, i := range x.union[lo:hi] {
		x.local = append(x.local, i-off)
	}
	return x.local
}

// partLen is the number of elements in partition j.
func (x *ExDyna) partLen(j int) int {
	lo, hi := x.topo.span(j)
	return hi - lo
}

// adapt sets tau (and the shares) and moves partition boundaries after a step that
// selected sum(counts) elements against a target of k. Everything it reads is the same on
// every rank.
func (x *ExDyna) adapt(k int) {
	total := 0
	for _, c := range x.counts {
		total += c
	}
	if x.paper {
		x.scale(float64(total) / float64(k))
	} else {
		x.measured(k)
	}
	blocks := x.topo.blocks
	x.topo.rebalance(x.counts, float64(total)/float64(len(x.counts)), func(b int) int {
		lo, _ := slices.BinarySearch(x.union, int32(blocks.start(b)))
		hi, _ := slices.BinarySearch(x.union, int32(blocks.start(b+1)))
		return hi - lo
	})
}

// measured sets tau where the workers' histograms together put k elements, and each
// partition's share to the part of them its histogram holds. Every rank computes both from
// the same messages, in partition order, so they agree bit for bit. Without a measurement
// (every partition empty or zero) they keep their values.
func (x *ExDyna) measured(k int) {
	t, ok := compress.ThresholdFor(x.hists, k)
	if !ok {
		return
	}
	x.tau = float64(t)
	sum := 0.0
	for j, h := range x.hists {
		x.shares[j] = h.Above(t)
		sum += x.shares[j]
	}
	if sum == 0 {
		return // cannot be, as t came from the same histograms; the shares stay whole
	}
	for j := range x.shares {
		x.shares[j] /= sum
	}
}

// scale moves tau by the paper's rule after a step that selected ratio times its target.
func (x *ExDyna) scale(ratio float64) {
	switch {
	case ratio > exdynaTooMany:
		x.tau *= exdynaUp
	case ratio <= exdynaTooFew:
		x.tau *= exdynaDown
	default:
		x.tau *= exdynaGentle
	}
}

// finish writes the average of the step's values into the tensors' gradients at the union's
// elements, and zero elsewhere.
func (x *ExDyna) finish() {
	world := float32(x.comm.Size())
	for id, t := range x.tensors {
		clear(t.Grad)
		off := x.offsets[id]
		for j := x.ranges[id]; j < x.ranges[id+1]; j++ {
			t.Grad[int(x.union[j])-off] = x.vals[j] / world
		}
	}
}

// The checkpointed state, little-endian:
//
//	u32 version, u64 elements N, u32 partitions P, u32 blocks, f64 tau, (P+1) × u32 bounds,
//	P × f64 shares
//
// N, P and the block count are there to refuse a state from another model or world size.
const exStateVersion = 2

// extraState encodes tau, the partition boundaries and the shares.
func (x *ExDyna) extraState() []byte {
	b := binary.LittleEndian.AppendUint32(nil, exStateVersion)
	b = binary.LittleEndian.AppendUint64(b, uint64(x.numel()))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(x.counts)))
	b = binary.LittleEndian.AppendUint32(b, uint32(x.topo.blocks.count))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x.tau))
	for _, v := range x.topo.bounds {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	for _, f := range x.shares {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
	}
	return b
}

// restoreExtra checks an encoded state against this pipeline and adopts it; on error
// nothing changes.
func (x *ExDyna) restoreExtra(b []byte) error {
	const head = 4 + 8 + 4 + 4 + 8
	p := len(x.counts)
	if len(b) >= 4 {
		if v := binary.LittleEndian.Uint32(b); v != exStateVersion {
			return fmt.Errorf("exdyna: saved state has version %d, this build reads %d", v, exStateVersion)
		}
	}
	if want := head + 4*(p+1) + 8*p; len(b) != want {
		return fmt.Errorf("exdyna: saved threshold and partitions take %d bytes, %d ranks need %d (state of another pipeline or world size?)", len(b), p, want)
	}
	if n := binary.LittleEndian.Uint64(b[4:]); n != uint64(x.numel()) {
		return fmt.Errorf("exdyna: saved state is for %d gradient elements, the model has %d", n, x.numel())
	}
	if got := binary.LittleEndian.Uint32(b[12:]); got != uint32(p) {
		return fmt.Errorf("exdyna: saved state has %d partitions, the world has %d ranks", got, p)
	}
	if got := binary.LittleEndian.Uint32(b[16:]); got != uint32(x.topo.blocks.count) {
		return fmt.Errorf("exdyna: saved state has %d blocks, this gradient has %d", got, x.topo.blocks.count)
	}
	tau := math.Float64frombits(binary.LittleEndian.Uint64(b[20:]))
	if !(tau >= 0) || math.IsInf(tau, 0) {
		return fmt.Errorf("exdyna: saved threshold %g is not a finite non-negative number", tau)
	}
	bounds := make([]int, p+1)
	for j := range bounds {
		bounds[j] = int(binary.LittleEndian.Uint32(b[head+4*j:]))
	}
	if bounds[0] != 0 || bounds[p] != x.topo.blocks.count {
		return fmt.Errorf("exdyna: saved partitions span blocks %d to %d, want 0 to %d", bounds[0], bounds[p], x.topo.blocks.count)
	}
	for j := range p {
		if bounds[j+1] < bounds[j] {
			return fmt.Errorf("exdyna: saved partition %d ends at block %d before it starts at %d", j, bounds[j+1], bounds[j])
		}
	}
	shares := make([]float64, p)
	for j := range shares {
		shares[j] = math.Float64frombits(binary.LittleEndian.Uint64(b[head+4*(p+1)+8*j:]))
		if !(shares[j] >= 0 && shares[j] <= 1) {
			return fmt.Errorf("exdyna: saved share %g of partition %d is not a fraction", shares[j], j)
		}
	}
	x.tau = tau
	copy(x.topo.bounds, bounds)
	copy(x.shares, shares)
	return nil
}

// State implements pipeline.Stateful: the step count, the error-feedback memory, and tau
// with the partition boundaries and shares in Extra. ExDyna needs no backprop order.
func (x *ExDyna) State() (pipeline.State, error) { return x.state(x.extraState()), nil }

// Restore implements pipeline.Stateful. ExDyna needs no backprop order: one in the state
// (the fusion engine's states carry it) is ignored.
func (x *ExDyna) Restore(st pipeline.State) error {
	return x.restore(st, x.extraState, x.restoreExtra)
}

// observedShares are the shares the step selected with, for exStep: none under the
// paper's threshold.
func (x *ExDyna) observedShares() []float64 {
	if x.paper {
		return nil
	}
	return slices.Clone(x.shares)
}
