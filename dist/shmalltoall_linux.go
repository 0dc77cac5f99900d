//go:build linux

package dist

import "encoding/binary"

// AllToAllV implements Communicator.
func (s *shmComm) AllToAllV(send [][]byte) ([][]byte, error) {
	return s.AllToAllVAsync(send).Wait()
}

// AllToAllVAsync implements Communicator.
func (s *shmComm) AllToAllVAsync(send [][]byte) GatherHandle {
	o, err := s.begin(collAllToAllV)
	if err != nil {
		return gatherHandle{failedHandle(err)}
	}
	h := newHandle()
	go func() {
		var out [][]byte
		err := s.run(o, func(o *shmOp) (err error) { out, err = s.allToAllV(o, send); return err })
		if err != nil {
			out = nil
		}
		h.finish(out, err)
	}()
	return gatherHandle{h}
}

// allToAllV streams the blocks through the slots: a rank's slot starts with the sizes of
// its P blocks (read in the first step only) and then holds P pieces, the one at place q
// for rank q, each a P-th of the rest of the slot. Every rank learns every size in the
// first step, so all agree on the number of steps without another round; the first
// pieces travel with the sizes.
func (s *shmComm) allToAllV(o *shmOp, send [][]byte) ([][]byte, error) {
	P, r := s.size, s.rank
	if bad := allToAllVArgs(send, P, s.e.o.maxMessage); bad != "" {
		return nil, s.invalid("%s", bad)
	}
	hdr := (8*P + 63) &^ 63
	width := (s.seg.chunk - hdr) / P
	if width >= 64 {
		width &^= 63 // pieces on cache lines of their own
	}
	if width < 1 {
		return nil, s.invalid("alltoallv among %d ranks needs shared memory slots of at least %d bytes, not %d (%s)",
			P, hdr+P, s.seg.chunk, EnvSharedMemoryChunk)
	}
	put := func(k int) {
		slot := s.seg.slot(r, s.nextParity())
		for q, b := range send {
			if off := k * width; q != r && off < len(b) {
				copy(slot[hdr+q*width:hdr+(q+1)*width], b[off:])
			}
		}
	}
	slot := s.seg.slot(r, s.nextParity())
	for q, b := range send {
		binary.LittleEndian.PutUint64(slot[8*q:], uint64(len(b)))
	}
	put(0)
	if err := s.first(o, shmDesc{size: uint64(P)}); err != nil {
		return nil, err
	}

	// This rank's blocks share one allocation, each capped so that appending to one
	// cannot spill into the next.
	lengths := make([]int, P)
	steps, total := 1, 0
	for p := range P {
		sizes := s.seg.slot(p, s.step&1)
		for q := range P {
			n := binary.LittleEndian.Uint64(sizes[8*q:])
			if n > uint64(s.e.o.maxMessage) {
				s.fail(fault{rank: p, reporter: r, cause: protocolErr("alltoallv block of %d bytes exceeds the limit of %d", n, s.e.o.maxMessage)})
				return nil, errAborted
			}
			steps = max(steps, (int(n)+width-1)/width)
			if q == r {
				lengths[p] = int(n)
				total += int(n)
			}
		}
	}
	all := make([]byte, total)
	out := make([][]byte, P)
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

	for k := 0; ; k++ {
		for p, blk := range out {
			if off := k * width; p != r && off < len(blk) {
				copy(blk[off:], s.seg.slot(p, s.step&1)[hdr+r*width:hdr+(r+1)*width])
			}
		}
		if k+1 == steps {
			return out, nil
		}
		put(k + 1)
		if _, err := s.sync(); err != nil {
			return nil, err
		}
	}
}
