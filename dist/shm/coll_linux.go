//go:build linux

package shm

import (
	"bytes"
	"fmt"
	"math"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/engine"
	"github.com/ssfusion/ssfusion/dist/internal/wire"
)

// AllReduce implements dist.Communicator.
func (s *shmComm) AllReduce(buf []float32, op dist.Op) error {
	o, err := s.begin(engine.CollAllReduce)
	if err != nil {
		return err
	}
	return s.run(o, func(o *shmOp) error { return s.allReduce(o, buf, op) })
}

// AllReduceAsync implements dist.Communicator.
func (s *shmComm) AllReduceAsync(buf []float32, op dist.Op) dist.Handle {
	o, err := s.begin(engine.CollAllReduce)
	if err != nil {
		return engine.FailedHandle(err)
	}
	h := engine.NewHandle()
	go func() { h.Finish(nil, s.run(o, func(o *shmOp) error { return s.allReduce(o, buf, op) })) }()
	return h
}

// AllGatherV implements dist.Communicator.
func (s *shmComm) AllGatherV(send []byte) ([][]byte, error) {
	o, err := s.begin(engine.CollAllGatherV)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	err = s.run(o, func(o *shmOp) (err error) { out, _, err = s.allGatherV(o, send, nil, nil); return err })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AllGatherVAsync implements dist.Communicator.
func (s *shmComm) AllGatherVAsync(send []byte) dist.GatherHandle {
	o, err := s.begin(engine.CollAllGatherV)
	if err != nil {
		return engine.GatherHandle{Handle: engine.FailedHandle(err)}
	}
	h := engine.NewHandle()
	go func() {
		var out [][]byte
		err := s.run(o, func(o *shmOp) (err error) { out, _, err = s.allGatherV(o, send, nil, nil); return err })
		if err != nil {
			out = nil
		}
		h.Finish(out, err)
	}()
	return engine.GatherHandle{Handle: h}
}

// Broadcast implements dist.Communicator.
func (s *shmComm) Broadcast(buf []byte, root int) error {
	o, err := s.begin(engine.CollBroadcast)
	if err != nil {
		return err
	}
	return s.run(o, func(o *shmOp) error { return s.broadcast(o, buf, root) })
}

// BroadcastAsync implements dist.Communicator.
func (s *shmComm) BroadcastAsync(buf []byte, root int) dist.Handle {
	o, err := s.begin(engine.CollBroadcast)
	if err != nil {
		return engine.FailedHandle(err)
	}
	h := engine.NewHandle()
	go func() { h.Finish(nil, s.run(o, func(o *shmOp) error { return s.broadcast(o, buf, root) })) }()
	return h
}

// Barrier implements dist.Communicator.
func (s *shmComm) Barrier() error {
	o, err := s.begin(engine.CollBarrier)
	if err != nil {
		return err
	}
	return s.run(o, func(o *shmOp) error { return s.first(o, shmDesc{}) })
}

// first ends the first step of a collective: it announces what this rank issued, syncs,
// and checks that every rank issued the same. Every rank sees the same descriptors and
// draws the same verdict, naming the first rank that differs from rank 0.
func (s *shmComm) first(o *shmOp, d shmDesc) error {
	d.seq = o.seq
	d.kind |= uint32(o.kind)
	*s.seg.desc(s.rank, s.nextParity()) = d
	st, err := s.sync()
	if err != nil {
		return err
	}
	if err := s.peersFailed(); err != nil {
		return err
	}
	ref := *s.seg.desc(0, st&1)
	for q := 1; q < s.size; q++ {
		if theirs := *s.seg.desc(q, st&1); !sameCollective(ref, theirs) {
			s.fail(engine.Fault{Rank: q, Reporter: s.rank, Cause: engine.MismatchErr("issued %s as #%d where rank 0 issued %s as #%d",
				describeShm(theirs), theirs.seq, describeShm(ref), ref.seq)})
			return engine.ErrAborted
		}
	}
	return nil
}

// sameCollective compares descriptors; an allgatherv's or a sendrecv's size (and a
// sendrecv's peers) are its own rank's.
func sameCollective(a, b shmDesc) bool {
	if a.seq != b.seq || a.kind != b.kind {
		return false
	}
	switch engine.CollKind(a.kind & 0xff) {
	case engine.CollAllGatherV, engine.CollSendRecv:
		return true
	}
	return a.size == b.size && a.root == b.root
}

func describeShm(d shmDesc) string {
	k, op := engine.CollKind(d.kind&0xff), dist.Op(d.kind>>8)
	switch k {
	case engine.CollAllReduce:
		return fmt.Sprintf("allreduce(%v, %d floats)", op, d.size)
	case engine.CollBroadcast:
		return fmt.Sprintf("broadcast(root %d, %d bytes)", d.root, d.size)
	}
	return k.String()
}

// allReduce sums in a fixed order whatever the timing: element i is always
// ((x0[i] + x1[i]) + x2[i]) + ..., computed once from the same operands, and only copied
// afterwards, so every rank ends with the same bits.
//
// Small buffers take one step: every rank writes its buffer, then each sums all of them.
// Larger ones stream through the slots a chunk per step; the rank that owns the r-th
// P-th of a chunk sums that part into the shared result area during the next step, and
// into its own buffer, and copies the other parts out once that step is over. The copy
// of chunk k+1 into the slots and the sums of chunk k share a step, so the pipeline needs
// one step per chunk plus one.
func (s *shmComm) allReduce(o *shmOp, buf []float32, op dist.Op) error {
	if op != dist.Sum && op != dist.Average {
		return s.invalid("allreduce op %v is neither dist.Sum nor dist.Average", op)
	}
	n := len(buf)
	d := shmDesc{kind: uint32(op) << 8, size: uint64(n)}
	o.sent, o.recv = engine.AllReduceVolume(int64(n)*4, s.size)
	if n*4 <= s.small {
		copy(s.seg.slot(s.rank, s.nextParity()), wire.F32Bytes(buf, true))
		if err := s.first(o, d); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		par := s.step & 1
		s.sumSlots(buf, par, 0, n)
		if op == dist.Average {
			wire.DivideBy(buf, float32(s.size))
		}
		return nil
	}

	per := s.seg.chunk / 4 // floats per chunk
	chunks := (n + per - 1) / per
	P, r := s.size, s.rank
	for k := 0; k <= chunks; k++ {
		if k < chunks {
			// The others need every part of the chunk but the one this rank sums.
			lo, hi := k*per, min(n, (k+1)*per)
			a, b := lo+(hi-lo)*r/P, lo+(hi-lo)*(r+1)/P
			slot := wire.BytesF32(s.seg.slot(r, s.nextParity()), true)
			copy(slot, buf[lo:a])
			copy(slot[b-lo:], buf[b:hi])
		}
		if k > 0 {
			// dist.Sum this rank's part of the previous chunk, written one step ago; its own
			// share is still in buf.
			lo := (k - 1) * per
			m := min(n, k*per) - lo
			a, b := m*r/P, m*(r+1)/P
			par := s.step & 1
			dst := wire.BytesF32(s.seg.result(par)[4*a:4*b], true)
			s.sumParts(dst, par, a, b, buf[lo+a:lo+b])
			if op == dist.Average {
				wire.DivideBy(dst, float32(P))
			}
			copy(buf[lo+a:lo+b], dst) // nobody reads this rank's buf: no need to wait
		}
		var err error
		if k == 0 {
			err = s.first(o, d)
		} else {
			_, err = s.sync()
		}
		if err != nil {
			return err
		}
		if k > 0 {
			lo, hi := (k-1)*per, min(n, k*per)
			a, b := (hi-lo)*r/P, (hi-lo)*(r+1)/P
			res := wire.BytesF32(s.seg.result((s.step - 1) & 1)[:4*(hi-lo)], true)
			copy(buf[lo:lo+a], res[:a])
			copy(buf[lo+b:hi], res[b:])
		}
	}
	return nil
}

// sumParts is sumSlots with this rank's operand taken from own instead of its slot.
func (s *shmComm) sumParts(dst []float32, par uint32, a, b int, own []float32) {
	srcs := s.operands(par, a, b)
	srcs[s.rank] = own
	sumRanks(dst, srcs)
}

// sumSlots sets dst to the sum, in rank order, of elements [a, b) of every rank's slot of
// the given parity.
func (s *shmComm) sumSlots(dst []float32, par uint32, a, b int) {
	sumRanks(dst, s.operands(par, a, b))
}

// operands returns elements [a, b) of every rank's slot of the given parity, in a slice
// that the next call reuses.
func (s *shmComm) operands(par uint32, a, b int) [][]float32 {
	if s.srcs == nil {
		s.srcs = make([][]float32, s.size)
	}
	for p := range s.srcs {
		s.srcs[p] = wire.BytesF32(s.seg.slot(p, par)[4*a:4*b], true)
	}
	return s.srcs
}

// broadcast streams root's buffer through its slot, a chunk per step.
func (s *shmComm) broadcast(o *shmOp, buf []byte, root int) error {
	if root < 0 || root >= s.size {
		return s.invalid("broadcast root %d outside [0, %d)", root, s.size)
	}
	o.sent, o.recv = engine.BroadcastVolume(int64(len(buf)), root, s.rank, s.size)
	C := s.seg.chunk
	for off := 0; off == 0 || off < len(buf); off += C {
		piece := buf[off:min(len(buf), off+C)]
		if s.rank == root {
			copy(s.seg.slot(root, s.nextParity()), piece)
		}
		var err error
		if off == 0 {
			err = s.first(o, shmDesc{root: uint32(root), size: uint64(len(buf))})
		} else {
			_, err = s.sync()
		}
		if err != nil {
			return err
		}
		if s.rank != root {
			copy(piece, s.seg.slot(root, s.step&1))
		}
	}
	return nil
}

// AllGatherVInto implements dist.GatherInto.
func (s *shmComm) AllGatherVInto(send, buf []byte, blocks [][]byte) ([][]byte, []byte, error) {
	o, err := s.begin(engine.CollAllGatherV)
	if err != nil {
		return nil, nil, err
	}
	err = s.run(o, func(o *shmOp) (err error) { blocks, buf, err = s.allGatherV(o, send, buf, blocks); return err })
	if err != nil {
		return nil, nil, err
	}
	return blocks, buf, nil
}

// allGatherV streams every rank's block through its slot, a chunk per step, for as many
// steps as the largest block needs. The first step carries the sizes, checked against
// the limit before anything is allocated.
//
// The blocks share one buffer, each capped so that appending to one cannot spill into
// the next: buf when it is large enough, else a new allocation, which it returns. When
// every block fits in one step, bytes.Join builds that allocation straight from the
// slots: it does not zero the memory it is about to overwrite, which would cost as much
// as the copy, and this rank's block comes from send without a detour through its slot.
// The slice of blocks is out when its capacity suffices.
func (s *shmComm) allGatherV(o *shmOp, send, buf []byte, out [][]byte) ([][]byte, []byte, error) {
	if max := s.e.Options().MaxMessage; int64(len(send)) > max {
		return nil, nil, s.invalid("allgatherv of %d bytes exceeds the limit of %d (dist.WithMaxMessage)", len(send), max)
	}
	C := s.seg.chunk
	put := func(off int) {
		if off < len(send) {
			copy(s.seg.slot(s.rank, s.nextParity()), send[off:])
		}
	}
	put(0)
	if err := s.first(o, shmDesc{size: uint64(len(send))}); err != nil {
		return nil, nil, err
	}
	if cap(out) < s.size {
		out = make([][]byte, s.size)
	}
	out = out[:s.size]
	var lengthsBuf [16]int64
	lengths := lengthsBuf[:0]
	steps, total := 1, 0
	par := s.step & 1
	for p := range s.size {
		n := s.seg.desc(p, par).size
		if n > uint64(s.e.Options().MaxMessage) || int(n) > math.MaxInt-total {
			s.fail(engine.Fault{Rank: p, Reporter: s.rank, Cause: engine.ProtocolErr("block of %d bytes exceeds the limit of %d", n, s.e.Options().MaxMessage)})
			return nil, nil, engine.ErrAborted
		}
		lengths = append(lengths, int64(n))
		total += int(n)
		steps = max(steps, (int(n)+C-1)/C)
		if p == s.rank {
			out[p] = send
		} else {
			out[p] = s.seg.slot(p, par)[:min(int(n), C)]
		}
	}
	o.sent, o.recv = engine.AllGatherVolume(lengths, s.rank)
	var all []byte
	switch {
	case cap(buf) >= total:
		all = buf[:total]
		if steps == 1 {
			off := 0
			for _, blk := range out {
				off += copy(all[off:], blk)
			}
		}
	case steps == 1:
		all = bytes.Join(out, nil)
	default:
		all = make([]byte, total)
	}
	if all == nil {
		all = []byte{} // a lone rank's empty block, which Join leaves nil
	}
	off := 0
	for p, n := range lengths {
		out[p] = all[off : off+int(n) : off+int(n)]
		off += int(n)
	}
	if steps == 1 {
		return out, all, nil
	}
	copy(out[s.rank], send)
	err := s.stream(steps, func(k int) {
		for p, blk := range out {
			if off := k * C; p != s.rank && off < len(blk) {
				copy(blk[off:], s.seg.slot(p, s.step&1))
			}
		}
	}, func(k int) { put(k * C) })
	if err != nil {
		return nil, nil, err
	}
	return out, all, nil
}

// stream runs the steps of a collective after its first, steps in all: at step k, take
// reads what the peers wrote for it; unless k is the last, put then writes this rank's
// part of step k+1 and the ranks sync.
func (s *shmComm) stream(steps int, take, put func(k int)) error {
	for k := 0; ; k++ {
		take(k)
		if k+1 == steps {
			return nil
		}
		put(k + 1)
		if _, err := s.sync(); err != nil {
			return err
		}
	}
}
