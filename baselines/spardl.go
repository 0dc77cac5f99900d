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

// SparDL is the SparDL pipeline (Zhao et al., "SparDL: Distributed Deep Learning Training
// with Efficient Sparse Communication", ICDE 2024): a sparse allreduce built as a
// reduce-scatter whose every round re-sparsifies what it merged, so that a worker never
// holds more than k values however many contributions meet, and whose discarded values
// stay in the residual of the worker that discarded them (global residual collection).
//
// The gradient of all tensors, end to end in tensor-id order, is accumulated with error
// feedback as each tensor is pushed (as in ExDyna and Ok-Topk) and cut into P blocks of
// equal length. When backward has ended (in Wait):
//
//  1. every worker selects the top k_b of each block b (k_b = density times its length)
//     and takes them out of its memory;
//  2. Spar-Reduce-Scatter: in ceil(log2 P) rounds worker r sends a run of the blocks it
//     holds to rank r+gap and receives the same run, starting at block r, from rank
//     r-gap (one SendRecv); it sums what it received into its own pairs of those blocks
//     and keeps the top k_b of each, adding the rest back into its memory. The gaps and
//     runs are the authors' non-recursive schedule, which works for any P: after the
//     last round worker r holds block r, summed over every worker;
//  3. one AllGatherV gives every worker every block's pairs, whose average lands in the
//     tensors' Grad (zero elsewhere).
//
// Ours: the authors' Spar-All-Gather trades latency against bandwidth with a tunable
// number of groups; we use the plain allgather (its one-group form). The selector named in
// cfg is not used: SparDL's selections are exact top-k. A step whose density reaches 1
// sends everything with one dense allreduce.
type SparDL struct {
	flatGradient
	topk   compress.TopK
	bounds []int // P+1 block boundaries in the flattened gradient
	rounds []spardlRound

	// Scratch of one step.
	held   []spardlBlock // by block: this worker's pairs of it
	picked []spardlBlock // by block: the step's first selection, for ExchangeMessage
	round  int           // the round in flight, for ExchangeMessage
	msg    []byte
	keys   []int32
	sel    []int32   // the gathered blocks' indices, ascending
	vals   []float32 // their sums
	local  []int32   // one tensor's held indices, for the memory
}

// spardlRound is one round of Spar-Reduce-Scatter for worker r: it sends blocks
// [r+gap, r+gap+run) to rank r+gap and receives blocks [r, r+run) from rank r-gap
// (block numbers mod P).
type spardlRound struct{ gap, run int }

// spardlBlock holds sparse pairs of one block: indices into the flattened gradient,
// ascending, and their values.
type spardlBlock struct {
	idx  []int32
	vals []float32
}

// spardlSchedule is the authors' schedule for p workers: ceil(log2 p) rounds whose runs
// are 2^(R-2), ..., 2, 1 preceded by p - 2^(R-1), and whose first gap is p less the first
// run, each next gap half the last.
func spardlSchedule(p int) []spardlRound {
	if p <= 1 {
		return nil
	}
	n := 0
	for 1<<n < p {
		n++
	}
	var runs []int
	if extra := p - 1<<(n-1); extra > 0 {
		runs = append(runs, extra)
	}
	for i := n - 2; i >= 0; i-- {
		runs = append(runs, 1<<i)
	}
	rounds := make([]spardlRound, len(runs))
	gap := p - runs[0]
	for i, run := range runs {
		rounds[i] = spardlRound{gap: gap, run: run}
		gap /= 2
	}
	return rounds
}

// NewSparDL returns the SparDL pipeline over comm.
func NewSparDL(comm dist.Communicator, tensors []pipeline.Tensor, cfg compress.Config) (*SparDL, error) {
	flat, err := newFlatGradient("spardl", comm, tensors, cfg)
	if err != nil {
		return nil, err
	}
	p := comm.Size()
	return &SparDL{
		flatGradient: flat, bounds: evenBounds(flat.numel(), p), rounds: spardlSchedule(p),
		held: make([]spardlBlock, p), picked: make([]spardlBlock, p),
	}, nil
}

// Wait implements pipeline.Pipeline: it runs the sparse allreduce of the step, or a
// dense one when the density reaches 1.
func (x *SparDL) Wait() error {
	return x.runStep(func(step, k int) error {
		if k < x.numel() {
			return x.sparse()
		}
		return x.averageAll()
	})
}

// kOf is how many pairs block b keeps.
func (x *SparDL) kOf(b int) int {
	return compress.KFor(x.bounds[b+1]-x.bounds[b], x.cfg.DensityAt(int(x.steps)))
}

func (x *SparDL) sparse() error {
	p, r := x.comm.Size(), x.comm.Rank()
	start := x.clock.Now()
	selected, err := x.selectBlocks()
	if err != nil {
		return err
	}
	for i, rd := range x.rounds {
		x.round = i
		to, from := (r+rd.gap)%p, (r-rd.gap+p)%p
		x.msg = x.appendBlocks(x.msg[:0], to, rd.run, x.held)
		got, err := x.comm.SendRecv(x.msg, to, from)
		if err != nil {
			return fmt.Errorf("spardl: round %d of the reduce-scatter: %w", i+1, err)
		}
		start = x.clock.Now()
		if err := x.merge(got, r, rd.run, from); err != nil {
			return err
		}
		selected += x.clock.Since(start)
	}
	x.msg = x.appendPairs(x.msg[:0], x.held[r])
	msgs, err := x.gatherer.AllGatherV(x.msg)
	if err != nil {
		return fmt.Errorf("spardl: allgather of the reduced blocks: %w", err)
	}
	start = x.clock.Now()
	if x.sel, x.vals, err = x.appendParts(x.sel[:0], x.vals[:0], msgs, x.bounds); err != nil {
		return err
	}
	missing := x.averageAt(x.sel, x.vals)
	x.meter.Selected(selected+x.clock.Since(start), len(x.sel), missing)
	return nil
}

// selectBlocks picks the top k_b of every block and takes them out of the memory.
func (x *SparDL) selectBlocks() (took time.Duration, err error) {
	for b := range x.held {
		start := x.clock.Now()
		lo, hi := x.bounds[b], x.bounds[b+1]
		idx, err := x.topk.Select(x.flat[lo:hi], x.kOf(b), x.keys[:0])
		if err != nil {
			return took, fmt.Errorf("spardl: selection in block %d: %w", b, err)
		}
		x.keys = idx
		blk := &x.held[b]
		blk.idx, blk.vals = blk.idx[:0], blk.vals[:0]
		for _, i := range idx {
			blk.idx = append(blk.idx, int32(lo)+i)
			blk.vals = append(blk.vals, x.flat[lo+int(i)])
		}
		x.picked[b].idx = append(x.picked[b].idx[:0], blk.idx...)
		x.picked[b].vals = append(x.picked[b].vals[:0], blk.vals...)
		took += x.clock.Work(start, "topk", hi-lo)
	}
	return took, x.clearSent()
}

// clearSent takes every held pair out of the memory, tensor by tensor. The held blocks,
// in block order, list their indices ascending, so one walk over them serves all tensors.
func (x *SparDL) clearSent() error {
	b, i := 0, 0 // the next held pair: x.held[b].idx[i]
	for id := range x.tensors {
		lo, hi := x.offsets[id], x.offsets[id+1]
		x.local = x.local[:0]
		for {
			for b < len(x.held) && i == len(x.held[b].idx) {
				b, i = b+1, 0
			}
			if b == len(x.held) || int(x.held[b].idx[i]) >= hi {
				break
			}
			x.local = append(x.local, x.held[b].idx[i]-int32(lo))
			i++
		}
		if err := x.mem.Sent(id, x.local); err != nil {
			return err
		}
	}
	return nil
}

// The pairs of a run of blocks go as, for each block in order: u32 count, then count ×
// (u32 offset in the block, f32 value), little-endian, offsets ascending. The allgather's
// message is one block's pairs with absolute indices: count × (u32 index, f32 value).

// appendBlocks encodes the run of blocks from first on (mod P) from src.
func (x *SparDL) appendBlocks(dst []byte, first, run int, src []spardlBlock) []byte {
	p := len(src)
	for j := range run {
		b := (first + j) % p
		blk := src[b]
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(blk.idx)))
		for i, idx := range blk.idx {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(int(idx)-x.bounds[b]))
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(blk.vals[i]))
		}
	}
	return dst
}

func (x *SparDL) appendPairs(dst []byte, blk spardlBlock) []byte {
	for i, idx := range blk.idx {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(idx))
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(blk.vals[i]))
	}
	return dst
}

// merge sums the received run of blocks, from block first on, into this worker's pairs,
// keeps the top k_b of each block and adds what it drops back into the memory.
func (x *SparDL) merge(msg []byte, first, run, from int) error {
	p := len(x.held)
	for j := range run {
		b := (first + j) % p
		if len(msg) < 4 {
			return fmt.Errorf("spardl: rank %d's message ends before block %d", from, b)
		}
		n := int(binary.LittleEndian.Uint32(msg))
		msg = msg[4:]
		if n > len(msg)/pairBytes {
			return fmt.Errorf("spardl: rank %d announces %d pairs for block %d in %d bytes", from, n, b, len(msg))
		}
		if err := x.mergeBlock(b, msg[:n*pairBytes], from); err != nil {
			return err
		}
		msg = msg[n*pairBytes:]
	}
	if len(msg) != 0 {
		return fmt.Errorf("spardl: rank %d sent %d bytes beyond its blocks", from, len(msg))
	}
	return nil
}

// mergeBlock merges block b's received pairs into the held ones (both ascending).
func (x *SparDL) mergeBlock(b int, pairs []byte, from int) error {
	blk := &x.held[b]
	lo, width := x.bounds[b], x.bounds[b+1]-x.bounds[b]
	idx := make([]int32, 0, len(blk.idx)+len(pairs)/pairBytes)
	vals := make([]float32, 0, cap(idx))
	h, prev := 0, -1
	for i := 0; i < len(pairs); i += pairBytes {
		o := int(binary.LittleEndian.Uint32(pairs[i:]))
		v := math.Float32frombits(binary.LittleEndian.Uint32(pairs[i+4:]))
		if o <= prev || o >= width || !compress.Finite(v) {
			return fmt.Errorf("spardl: rank %d sent element %d = %g for block %d of %d elements (after %d)", from, o, v, b, width, prev)
		}
		prev = o
		at := int32(lo + o)
		for ; h < len(blk.idx) && blk.idx[h] < at; h++ {
			idx, vals = append(idx, blk.idx[h]), append(vals, blk.vals[h])
		}
		if h < len(blk.idx) && blk.idx[h] == at {
			v += blk.vals[h]
			h++
		}
		idx, vals = append(idx, at), append(vals, v)
	}
	idx, vals = append(idx, blk.idx[h:]...), append(vals, blk.vals[h:]...)
	start := x.clock.Now()
	if k := x.kOf(b); len(idx) > k {
		keep, err := x.topk.Select(vals, k, x.keys[:0])
		if err != nil {
			return fmt.Errorf("spardl: selection in block %d: %w", b, err)
		}
		x.keys = keep
		// The dropped sums go back to this worker's memory: nothing leaves the cluster
		// unsent.
		next := 0
		for i := range idx {
			if next < len(keep) && int(keep[next]) == i {
				idx[next], vals[next] = idx[i], vals[i]
				next++
				continue
			}
			x.flat[idx[i]] += vals[i]
		}
		idx, vals = idx[:next], vals[:next]
		x.clock.Work(start, "topk", len(vals))
	}
	blk.idx, blk.vals = idx, vals
	return nil
}

// ExchangeMessage returns what rank from would send this rank in the round in flight if
// every worker held this one's gradient: for each block of the run, its first selection
// times the number of workers whose values rank from has summed into it by then.
func (x *SparDL) ExchangeMessage(own []byte, from int) []byte {
	rd := x.rounds[x.round]
	held := spardlContributions(x.rounds[:x.round], len(x.held))
	p, r := len(x.held), x.comm.Rank()
	scaled := make([]spardlBlock, p)
	for j := range rd.run {
		b := (r + j) % p
		c := float32(held[rd.gap+j])
		scaled[b].idx = x.picked[b].idx
		for _, v := range x.picked[b].vals {
			scaled[b].vals = append(scaled[b].vals, c*v)
		}
	}
	return x.appendBlocks(nil, r, rd.run, scaled)
}

// MirrorMessage returns the allgather message rank would send if every worker held this
// one's gradient: its block's first selection, summed over every worker.
func (x *SparDL) MirrorMessage(own []byte, rank int) []byte {
	p := float32(x.comm.Size())
	blk := spardlBlock{idx: x.picked[rank].idx}
	for _, v := range x.picked[rank].vals {
		blk.vals = append(blk.vals, p*v)
	}
	return x.appendPairs(nil, blk)
}

// spardlContributions returns, after the given rounds, how many workers' values a worker
// has summed into the block j places after its own, for j in [0, p): the schedule is the
// same for every worker, shifted.
func spardlContributions(rounds []spardlRound, p int) []int {
	held := make([]int, p)
	for j := range held {
		held[j] = 1
	}
	for _, rd := range rounds {
		next := slices.Clone(held)
		for j := range rd.run {
			next[j] += held[rd.gap+j] // what the worker gap places back held for it
		}
		held = next
	}
	return held
}

// State implements pipeline.Stateful: the step count and the error-feedback memory.
func (x *SparDL) State() (pipeline.State, error) { return x.state(nil), nil }

// Restore implements pipeline.Stateful.
func (x *SparDL) Restore(st pipeline.State) error {
	return x.restore(st, func() []byte { return nil }, func(b []byte) error {
		if len(b) != 0 {
			return fmt.Errorf("spardl: saved state carries %d bytes of another pipeline's state", len(b))
		}
		return nil
	})
}
