//go:build linux

package shm

import (
	"encoding/binary"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/engine"
)

// AllToAllV implements dist.Communicator. It runs on the caller's goroutine: a goroutine
// handing over to it, as the asynchronous form needs, costs more than the exchange of a
// small message.
func (s *shmComm) AllToAllV(send [][]byte) ([][]byte, error) {
	out, _, err := s.AllToAllVInto(send, nil, nil)
	return out, err
}

// AllToAllVInto implements dist.ExchangeInto.
func (s *shmComm) AllToAllVInto(send [][]byte, buf []byte, blocks [][]byte) ([][]byte, []byte, error) {
	o, err := s.begin(engine.CollAllToAllV)
	if err != nil {
		return nil, nil, err
	}
	err = s.run(o, func(o *shmOp) (err error) { blocks, buf, err = s.allToAllV(o, send, buf, blocks); return err })
	if err != nil {
		return nil, nil, err
	}
	return blocks, buf, nil
}

// AllToAllVAsync implements dist.Communicator.
func (s *shmComm) AllToAllVAsync(send [][]byte) dist.GatherHandle {
	o, err := s.begin(engine.CollAllToAllV)
	if err != nil {
		return engine.GatherHandle{Handle: engine.FailedHandle(err)}
	}
	h := engine.NewHandle()
	go func() {
		var out [][]byte
		err := s.run(o, func(o *shmOp) (err error) { out, _, err = s.allToAllV(o, send, nil, nil); return err })
		if err != nil {
			out = nil
		}
		h.Finish(out, err)
	}()
	return engine.GatherHandle{Handle: h}
}

// allToAllV streams the blocks through the slots: a rank's slot holds P pieces, the one at
// place q for rank q, each a P-th of the slot, and the header before the slot the sizes of
// its P blocks (read in the first step only). Every rank learns every size in the first
// step, so all agree on the number of steps without another round; the first pieces
// travel with the sizes.
//
// The received blocks share one buffer, each capped so that appending to one cannot spill
// into the next: buf when it is large enough, else a new allocation, which it returns
// with them. The slice of blocks is out when its capacity suffices.
func (s *shmComm) allToAllV(o *shmOp, send [][]byte, buf []byte, out [][]byte) ([][]byte, []byte, error) {
	P, r := s.size, s.rank
	if bad := engine.AllToAllVArgs(send, P, s.e.Options().MaxMessage); bad != "" {
		return nil, nil, s.invalid("%s", bad)
	}
	width := pieceWidth(s.seg.chunk, P)
	if width < 1 { // more ranks than bytes in a slot
		return nil, nil, s.invalid("alltoallv among %d ranks needs shared memory slots of at least %d bytes, not %d (%s)",
			P, P, s.seg.chunk, EnvSharedMemoryChunk)
	}
	put := func(k int) {
		slot := s.seg.slot(r, s.nextParity())
		for q, b := range send {
			if off := k * width; q != r && off < len(b) {
				copy(slot[q*width:(q+1)*width], b[off:])
			}
		}
	}
	sizes := s.seg.slotSizes(r, s.nextParity())
	for q, b := range send {
		binary.LittleEndian.PutUint64(sizes[8*q:], uint64(len(b)))
	}
	put(0)
	if err := s.first(o, shmDesc{size: uint64(P)}); err != nil {
		return nil, nil, err
	}

	var lengthsBuf [16]int
	lengths := lengthsBuf[:0]
	if P > len(lengthsBuf) {
		lengths = make([]int, 0, P)
	}
	lengths = lengths[:P]
	steps, total := 1, 0
	for p := range P {
		sizes := s.seg.slotSizes(p, s.step&1)
		for q := range P {
			n := binary.LittleEndian.Uint64(sizes[8*q:])
			if n > uint64(s.e.Options().MaxMessage) {
				s.fail(engine.Fault{Rank: p, Reporter: r, Cause: engine.ProtocolErr("alltoallv block of %d bytes exceeds the limit of %d", n, s.e.Options().MaxMessage)})
				return nil, nil, engine.ErrAborted
			}
			steps = max(steps, (int(n)+width-1)/width)
			if q == r {
				lengths[p] = int(n)
				total += int(n)
			}
		}
	}
	var all []byte
	if buf != nil && cap(buf) >= total {
		all = buf[:total]
	} else {
		all = make([]byte, total)
	}
	if cap(out) < P {
		out = make([][]byte, P)
	}
	out = out[:P]
	var sent int64
	for p, off := 0, 0; p < P; p++ {
		out[p] = all[off : off+lengths[p] : off+lengths[p]]
		off += lengths[p]
		if p != r {
			sent += int64(len(send[p]))
		}
	}
	copy(out[r], send[r])
	o.sent, o.recv = sent, int64(total-len(out[r]))

	err := s.stream(steps, func(k int) {
		for p, blk := range out {
			if off := k * width; p != r && off < len(blk) {
				copy(blk[off:], s.seg.slot(p, s.step&1)[r*width:(r+1)*width])
			}
		}
	}, put)
	if err != nil {
		return nil, nil, err
	}
	return out, all, nil
}

// pieceWidth is the bytes of a slot of chunk bytes that an alltoallv among P ranks gives
// each destination: a P-th of the slot, on cache lines of their own when it is a line or
// more. Zero when the slot has fewer bytes than there are ranks.
func pieceWidth(chunk, P int) int {
	w := chunk / P
	if w >= 64 {
		w &^= 63
	}
	return w
}

// SendRecv implements dist.Communicator.
func (s *shmComm) SendRecv(send []byte, to, from int) ([]byte, error) {
	o, err := s.begin(engine.CollSendRecv)
	if err != nil {
		return nil, err
	}
	var out []byte
	err = s.run(o, func(o *shmOp) (err error) { out, err = s.sendRecv(o, send, to, from); return err })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// sendRecv streams each rank's block through its slot, a chunk per step, for as many
// steps as the largest block needs. The first step's descriptors carry every rank's size
// and peers (root holds to, and from << 16), so that every rank checks that the peers
// pair up and reaches the same verdict.
func (s *shmComm) sendRecv(o *shmOp, send []byte, to, from int) ([]byte, error) {
	P, r := s.size, s.rank
	if bad := engine.SendRecvArgs(send, to, from, r, P, s.e.Options().MaxMessage); bad != "" {
		return nil, s.invalid("%s", bad)
	}
	C := s.seg.chunk
	put := func(off int) {
		if to != r && off < len(send) {
			copy(s.seg.slot(r, s.nextParity()), send[off:])
		}
	}
	put(0)
	if err := s.first(o, shmDesc{size: uint64(len(send)), root: uint32(to) | uint32(from)<<16}); err != nil {
		return nil, err
	}
	steps := 1
	for q := range P {
		d := s.seg.desc(q, s.step&1)
		if qTo := int(d.root & 0xffff); qTo >= P || int(s.seg.desc(qTo, s.step&1).root>>16) != q {
			s.fail(engine.Fault{Rank: q, Reporter: r, Cause: engine.MismatchErr("sendrecv to rank %d, which does not receive from it", qTo)})
			return nil, engine.ErrAborted
		}
		if d.size > uint64(s.e.Options().MaxMessage) {
			s.fail(engine.Fault{Rank: q, Reporter: r, Cause: engine.ProtocolErr("sendrecv block of %d bytes exceeds the limit of %d", d.size, s.e.Options().MaxMessage)})
			return nil, engine.ErrAborted
		}
		steps = max(steps, (int(d.size)+C-1)/C)
	}
	out := make([]byte, s.seg.desc(from, s.step&1).size)
	if to == r {
		copy(out, send)
	} else {
		o.sent, o.recv = int64(len(send)), int64(len(out))
	}
	err := s.stream(steps, func(k int) {
		if off := k * C; from != r && off < len(out) {
			copy(out[off:], s.seg.slot(from, s.step&1))
		}
	}, func(k int) { put(k * C) })
	if err != nil {
		return nil, err
	}
	return out, nil
}
