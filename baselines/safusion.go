package baselines

import (
	"errors"
	"fmt"
	"time"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/fusion"
	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
)

// DefaultSAFusionWarmup is NewSAFusion's number of warm-up steps, with ordinary buffers,
// timing backward.
const DefaultSAFusionWarmup = 5

// defaultSAFusionNetwork is the network NewSAFusion plans for when given none: flat, over
// the 10 Gbit/s links found in SAFusion's code. We take their start-up over the 3.78 ms per
// message its buffer-sizing code uses because they fit the alpha-beta formula the planner
// is written in, and they agree with it: at P = 8, (P-1)*alpha = 3.64 ms.
func defaultSAFusionNetwork() netmodel.Network {
	link, _ := netmodel.NetworkPreset(10e9)
	return netmodel.Network{Inter: link}
}

// NewSAFusion returns SAFusion (HPDC 2025), "sparsification ahead of fusion":
//
//   - Every tensor is sparsified on its own, with error feedback, as soon as its gradient
//     arrives, sending k_i = max(1, floor(density*n_i)) pairs (compress.KFor) picked by the
//     configured selector, so no tensor goes missing; the sparse results of each fusion
//     buffer are encoded into one message and allgathered, as in per-tensor sparsification.
//   - Inter-worker gradient alignment: every rank sends exactly k_i pairs of every tensor,
//     so the messages of a buffer have the same length on all ranks and no rank waits for a
//     longer chunk. A selector that returns fewer (sampled thresholds may) is padded with
//     zero values at an index it selected (index 0 when it selected none): adding zero
//     changes no sum, and the padding is not cleared from the error-feedback memory. Every
//     rank checks on receipt that every message has the aligned length. SAFusionUnaligned
//     turns the alignment off, to measure what it costs and saves.
//   - Intra-worker adaptive buffer sizing: the first warmupSteps steps run with ordinary
//     buffers of up to thresholdBytes (fusion.PlanBuckets) while each tensor's backward
//     and selection times are measured. At the end of the last warm-up step rank 0's
//     averages are broadcast and every rank plans the same new buffers from them with the
//     cost model (see planBuffers); later steps use those.
//
// net is the network the buffers are planned for; its zero value means a flat one over
// 10 Gbit/s links with the constants found in SAFusion's code (netmodel.NetworkPreset).
// warmupSteps 0 means DefaultSAFusionWarmup; otherwise it must be at least 2, since the
// first step of a fresh pipeline replays its gradients at the end of backward and cannot
// be timed.
//
// Since each tensor is selected on its own and every buffer is scatter-averaged tensor by
// tensor in rank order, the aggregated gradients do not depend on the buffers: they are
// bit for bit per-tensor sparsification's with the same configuration. The buffer plan is
// not checkpointed: a restored pipeline times warmupSteps steps again and replans.
//
// Metrics: selection time, density and missing tensors as per-tensor sparsification
// reports them. Padding counts as sent bytes but not as selected elements, so density is
// what the selector picked and a tensor padded from nothing counts as missing. Extra holds
// SAFusionAllGatherMS.
func NewSAFusion(comm dist.Communicator, tensors []pipeline.Tensor, thresholdBytes int, cfg compress.Config, net netmodel.Network, warmupSteps int, opts ...SAFusionOption) (pipeline.Pipeline, error) {
	f, _, err := newSAFusion(comm, tensors, thresholdBytes, cfg, net, warmupSteps, opts...)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// SAFusionAllGatherMS names, in StepMetrics.Extra, SAFusion's time in its sparse
// allgathers in a step, in milliseconds: the communicator's time from issue to completion
// (dist.OpStats.Time), summed over the step's allgathers, one per fusion buffer. It is
// transfer and waiting for the other ranks together, since the communicator does not tell
// them apart, and allgathers in flight together each count in full, so it can exceed
// StepMetrics.Comm, their union. Alignment is meant to shorten the waiting: compare the
// figure with and without it.
const SAFusionAllGatherMS = "allgather_ms"

// An SAFusionOption changes how NewSAFusion's pipeline runs.
type SAFusionOption func(*saFusion)

// SAFusionUnaligned turns the inter-worker alignment off: every rank sends the pairs its
// selector picked and no padding, so the messages of a buffer may differ in length
// between ranks, as in per-tensor sparsification, and a message is only checked not to be
// longer than the aligned length. The aggregated gradients and the error-feedback memory
// are the aligned pipeline's bit for bit, since padding adds zeros and clears nothing;
// only the bytes on the wire and the time differ. With a selector that always returns k_i
// (topk, randomk) the two modes send the same.
func SAFusionUnaligned() SAFusionOption { return func(p *saFusion) { p.unaligned = true } }

// newSAFusion is NewSAFusion that also returns the stage, for tests to watch.
func newSAFusion(comm dist.Communicator, tensors []pipeline.Tensor, thresholdBytes int, cfg compress.Config, net netmodel.Network, warmupSteps int, opts ...SAFusionOption) (*fusion.Fusion, *saFusion, error) {
	if comm == nil {
		return nil, nil, errors.New("SAFusion: no communicator")
	}
	if err := cfg.Check(); err != nil {
		return nil, nil, fmt.Errorf("SAFusion: %w", err)
	}
	if net == (netmodel.Network{}) {
		net = defaultSAFusionNetwork()
	}
	if err := net.Check(); err != nil {
		return nil, nil, fmt.Errorf("SAFusion: %w", err)
	}
	switch {
	case warmupSteps == 0:
		warmupSteps = DefaultSAFusionWarmup
	case warmupSteps < 2:
		return nil, nil, fmt.Errorf("SAFusion: %d warm-up steps: need at least 2, as the first step cannot be timed", warmupSteps)
	}
	sel, err := compress.NewSelector(cfg.Selector, cfg.Seed+uint64(comm.Rank()))
	if err != nil {
		return nil, nil, fmt.Errorf("SAFusion: %w", err)
	}
	s := &saFusion{comm: comm, tensors: tensors, cfg: cfg, net: net, sel: sel, timer: newWarmupTimer(warmupSteps, len(tensors))}
	for _, o := range opts {
		o(s)
	}
	f, err := fusion.New(comm, tensors, thresholdBytes, s, true)
	if err != nil {
		return nil, nil, fmt.Errorf("SAFusion: %w", err)
	}
	return f, s, nil
}

// saFusion is SAFusion's stage.
type saFusion struct {
	comm    dist.Communicator
	tensors []pipeline.Tensor
	cfg     compress.Config
	net     netmodel.Network
	// unaligned sends what the selector picked, without padding (SAFusionUnaligned).
	unaligned bool

	e       fusion.Engine
	sel     compress.Selector    // selection runs on the pushing goroutine only
	c       *compress.Compressor // kept across replans
	buckets []fusion.Bucket
	bufs    []*alignedBuffer

	timer *warmupTimer // the warm-up steps' timings of backward and selection
	// gatherBefore is the communicator's AllGatherV time when the step's first allgather
	// was issued; Finish reports the difference (SAFusionAllGatherMS).
	gatherBefore time.Duration

	// Test hooks, nil in use.
	onGather func(step, buffer int, ids, lengths []int) // the buffer's tensors; message lengths by rank
	onReplan func(timings []tensorTiming, counts []int) // what the plan was made from
}

// Memory returns the error-feedback memory, nil before the plan; checkpoints read it.
func (p *saFusion) Memory() *compress.Memory { return p.c.Memory() }

// Plan builds one aligned buffer per fusion buffer. It is called again when the warm-up
// replans; the compressor, with the error-feedback memory, is created the first time only
// and kept.
func (p *saFusion) Plan(e fusion.Engine, buckets []fusion.Bucket) ([]int, bool, error) {
	p.e = e
	if p.c == nil {
		var err error
		if p.c, err = fusion.NewCompressor(e, p.cfg, pipeline.Sizes(p.tensors), p.sel); err != nil {
			return nil, false, fmt.Errorf("SAFusion: %w", err)
		}
	}
	p.buckets = buckets
	p.bufs = make([]*alignedBuffer, len(buckets))
	parts := make([]int, len(buckets))
	for b, bucket := range buckets {
		p.bufs[b] = newAlignedBuffer(p.tensors, bucket.Tensors)
		parts[b] = len(bucket.Tensors)
	}
	return parts, false, nil
}

// Process selects tensor id's k_i pairs and, aligned, pads them to exactly k_i.
//
// In timed warm-up steps it measures the tensor's backward time (see warmupTimer) and its
// selection time as everything this call does before the tensor's pairs are ready
// (accumulation, selection, padding).
func (p *saFusion) Process(id int, s fusion.Slot, grad []float32) error {
	start := p.timer.begin(p.e, id)
	part := &p.bufs[s.Bucket].Parts[s.Index]
	if err := p.c.Compress(id, grad, part); err != nil {
		return err
	}
	if !p.unaligned {
		pad(part, p.c.K(len(grad)))
	}
	p.timer.prepared(p.e, id, start)
	p.e.Done(s.Bucket)
	p.timer.end(p.e)
	return nil
}

// pad brings part up to k pairs with zero values at its last selected index, or at index
// 0 when nothing was selected. A zero adds nothing in the scatter-average, whatever the
// index, and the last index keeps the indices in ascending order. It must run after
// the compressor has cleared the selected elements from the memory, so that the memory
// at a padded index is kept. A part with more than k pairs (a selector that broke its
// contract) is left alone: every rank's length check reports it.
func pad(part *compress.SparseTensor, k int) {
	var at int32
	if n := len(part.Indices); n > 0 {
		at = part.Indices[n-1]
	}
	for len(part.Indices) < k {
		part.Indices = append(part.Indices, at)
		part.Values = append(part.Values, 0)
	}
}

// Issue starts buffer b's allgather. Buffers are issued in order and nothing of this
// step's is in flight before buffer 0's, so the step's allgather time counts from the
// communicator's AllGatherV time then.
func (p *saFusion) Issue(b int) fusion.Completion {
	if b == 0 {
		p.gatherBefore = p.comm.Stats().AllGatherV.Time
	}
	return p.bufs[b].AllGather(p.comm)
}

// Finish checks the length of every rank's message, scatter-averages the buffers and, at
// the end of the warm-up, replans. It reads the allgather time first, before the replan's
// broadcast.
func (p *saFusion) Finish() error {
	// Every allgather of the step has been waited for, and a communicator has counted a
	// collective's time by the time its Wait returns.
	gathered := p.comm.Stats().AllGatherV.Time - p.gatherBefore
	p.e.Meter().SetExtra(SAFusionAllGatherMS, float64(gathered)/float64(time.Millisecond))
	step := p.e.Step()
	density := p.cfg.DensityAt(step)
	for b, buf := range p.bufs {
		if p.onGather != nil {
			ids := make([]int, len(buf.Parts))
			for i, part := range buf.Parts {
				ids[i] = part.ID
			}
			lengths := make([]int, len(buf.Received()))
			for r, msg := range buf.Received() {
				lengths[r] = len(msg)
			}
			p.onGather(step, b, ids, lengths)
		}
		if err := buf.average(density, !p.unaligned); err != nil {
			return fmt.Errorf("SAFusion: fusion buffer %d: %w", b, err)
		}
	}
	if !p.timer.stepDone(p.e) {
		return nil
	}
	if err := p.replan(); err != nil {
		return fmt.Errorf("SAFusion: sizing the fusion buffers: %w", err)
	}
	return nil
}

// replan agrees on rank 0's warm-up timings, plans the buffers from them and asks the
// Fusion to adopt the plan from the next step on. Every rank calls it at the end of the
// same step, after the step's collectives have completed, so the broadcast is matched.
func (p *saFusion) replan() error {
	order := planOrder(p.buckets)
	backward, selection, err := p.timer.agree(p.comm, order)
	if err != nil {
		return err
	}
	timings := make([]tensorTiming, len(order))
	for i, id := range order {
		// The buffers are planned for the target density, which holds after any DGC
		// density warm-up.
		k := compress.KFor(len(p.tensors[id].Grad), p.cfg.Density)
		timings[i] = tensorTiming{Bytes: float64(compress.SparseHeaderBytes + compress.SparsePairBytes*k), Backward: backward[i], Select: selection[i]}
	}
	counts := planBuffers(timings, p.net, p.comm.Size())
	if p.onReplan != nil {
		p.onReplan(timings, counts)
	}
	return replanInto(p.e, p.tensors, order, counts)
}

func (p *saFusion) Close() error { return nil }

// alignedBuffer is the sparse part of one SAFusion fusion buffer: a fusion.SparseBuffer
// whose messages must all have the length that k_i pairs per tensor give.
type alignedBuffer struct {
	*fusion.SparseBuffer
	numel []int // element count of each tensor, in buffer order
}

func newAlignedBuffer(tensors []pipeline.Tensor, ids []int) *alignedBuffer {
	a := &alignedBuffer{SparseBuffer: fusion.NewSparseBuffer(tensors, ids), numel: make([]int, len(ids))}
	for i, id := range ids {
		a.numel[i] = len(tensors[id].Grad)
	}
	return a
}

// wireSize is the length every rank's message has at density: each tensor sends exactly
// KFor(n_i, density) pairs.
func (a *alignedBuffer) wireSize(density float64) int {
	n := compress.SparseCountBytes
	for _, numel := range a.numel {
		n += compress.SparseHeaderBytes + compress.SparsePairBytes*compress.KFor(numel, density)
	}
	return n
}

// average checks that every rank's message has the aligned length at density, or, when
// not aligned, at most that length, then sets the buffer's tensors to the average of all
// ranks' pairs (SparseBuffer.Average). A message of another length is an error naming its
// rank; then no gradient is changed.
func (a *alignedBuffer) average(density float64, aligned bool) error {
	want := a.wireSize(density)
	for r, msg := range a.Received() {
		switch {
		case aligned && len(msg) != want:
			return fmt.Errorf("rank %d sent %d bytes of sparse gradients, aligned buffers are %d bytes on every rank", r, len(msg), want)
		case !aligned && len(msg) > want:
			return fmt.Errorf("rank %d sent %d bytes of sparse gradients, more than the %d bytes of k_i pairs per tensor", r, len(msg), want)
		}
	}
	return a.Average()
}

// tensorTiming is what the buffer planner knows of one tensor, in backprop order.
type tensorTiming struct {
	Bytes    float64 // what the tensor adds to its buffer's message, per worker
	Backward float64 // seconds of backward from the previous tensor's gradient to this one's
	Select   float64 // seconds from the gradient's arrival until its pairs are ready
}

// planBuffers is SAFusion's intra-worker adaptive buffer sizing: it cuts the tensors,
// given in backprop order, into fusion buffers and returns how many consecutive tensors
// each buffer holds.
//
// The model (ours, after SAFusion's adaptive buffer sizing and the three steps of
// SAFusion's optimal_gradient_merging, rewritten on the alpha-beta model): tensor i's pairs
// are ready at r_i, the sum of Backward and Select over tensors 0..i, except the first
// tensor's Backward, which the pipeline cannot see (time runs from its gradient); backward,
// with selection, ends at R = r_{L-1}. A buffer's communication takes c =
// net.AllGather(world, sum of its tensors' Bytes), on a flat network
// (P-1)*alpha + (P-1)*m*beta. "Production time" of some tensors is the sum of their
// Backward + Select: how long the following tensors take to become ready.
//
//  1. Grow: walk the tensors; a buffer closes after tensor i once its communication would
//     be hidden by the production time still to come, c <= R - r_i, and grows while it
//     would not. c only grows and R - r_i only shrinks as the buffer grows, so the first
//     buffer that cannot be hidden grows to the last tensor: before it every tensor is a
//     group of its own, the tail is one group. (Merging is the next step's job.)
//  2. Merge: the first group is the first buffer. Then repeatedly, with c the
//     communication time of the buffer formed last, take the following groups whose
//     production time, summed, is at most c: they become ready while that buffer is still
//     communicating and would queue behind it anyway, so they travel as one new buffer,
//     saving start-ups at no loss of overlap. When the next group alone takes longer than
//     c, it becomes a buffer by itself.
//  3. Tail: simulate the buffers' communications one after another, each starting when its
//     last tensor is ready and the previous one has finished. Once a buffer's
//     communication finishes at or after R, the remaining backward time has run out: the
//     buffers after it cannot overlap any backward, so they are merged into one last
//     buffer, which saves their start-ups.
//
// Comparisons are inclusive ("hidden" allows equality). With world 1 every communication
// costs 0. The result does not depend on anything but its arguments, so every rank that
// plans from the same timings plans the same buffers.
func planBuffers(ts []tensorTiming, net netmodel.Network, world int) []int {
	L := len(ts)
	if L == 0 {
		return nil
	}
	prefixBytes := make([]float64, L+1)
	ready := make([]float64, L)
	t := 0.0
	for i, x := range ts {
		prefixBytes[i+1] = prefixBytes[i] + x.Bytes
		if i > 0 {
			t += x.Backward
		}
		t += x.Select
		ready[i] = t
	}
	end := ready[L-1]
	// comm is the communication time of a buffer of tensors [lo, hi).
	comm := func(lo, hi int) float64 {
		return net.AllGather(world, int(prefixBytes[hi]-prefixBytes[lo])).Seconds()
	}
	// production is the production time of tensors [lo, hi), lo >= 1.
	production := func(lo, hi int) float64 { return ready[hi-1] - ready[lo-1] }

	// 1. Grow. groups holds the exclusive ends of the groups.
	var groups []int
	for lo, i := 0, 0; i < L; i++ {
		if comm(lo, i+1) > end-ready[i] {
			groups = append(groups, L) // not hidden: the tail, grown to the last tensor
			break
		}
		groups = append(groups, i+1)
		lo = i + 1
	}

	// 2. Merge. bufs holds the exclusive ends of the buffers.
	bufs := []int{groups[0]}
	c := comm(0, groups[0])
	for g := 1; g < len(groups); {
		lo := groups[g-1]
		h := g
		for h < len(groups) && production(lo, groups[h]) <= c {
			h++
		}
		if h == g {
			h = g + 1
		}
		bufs = append(bufs, groups[h-1])
		c = comm(lo, groups[h-1])
		g = h
	}

	// 3. Tail.
	free, lo := 0.0, 0
	for i, hi := range bufs {
		free = max(free, ready[hi-1]) + comm(lo, hi)
		lo = hi
		if free >= end && i < len(bufs)-1 {
			bufs = append(bufs[:i+1], L)
			break
		}
	}

	counts := make([]int, len(bufs))
	for i, hi := range bufs {
		if i == 0 {
			counts[i] = hi
		} else {
			counts[i] = hi - bufs[i-1]
		}
	}
	return counts
}
