package engine

import "github.com/ssfusion/ssfusion/dist"

// AllGatherV implements dist.Communicator.
func (e *Engine) AllGatherV(send []byte) ([][]byte, error) {
	c, err := e.begin(CollAllGatherV)
	if err != nil {
		return nil, err
	}
	out, err := c.allGatherV(send)
	if err = c.end(err); err != nil {
		return nil, err
	}
	return out, nil
}

// AllGatherVAsync implements dist.Communicator.
func (e *Engine) AllGatherVAsync(send []byte) dist.GatherHandle {
	c, err := e.begin(CollAllGatherV)
	if err != nil {
		return GatherHandle{FailedHandle(err)}
	}
	h := NewHandle()
	go func() {
		out, err := c.allGatherV(send)
		if err = c.end(err); err != nil {
			out = nil
		}
		h.Finish(out, err)
	}()
	return GatherHandle{h}
}

// allGatherV is a ring: at step i rank r sends block r-i (rank r-i's bytes) to its right
// neighbour and receives block r-i-1 from its left one, P-1 steps, forwarding each frame
// as it arrives. Sizes are not exchanged in a round of their own: every frame of a block
// carries the block's owner and total size, so a receiver learns the size with the first
// frame, checks it against the limit, and allocates the block once. An empty block is
// one empty frame.
//
// Only one outgoing link per rank is busy at a time, so on shaped links the time follows
// the ring cost model, (P-1) * m * beta, as a NIC-bound cluster would.
func (c *coll) allGatherV(send []byte) ([][]byte, error) {
	e := c.e
	P, r := e.size, e.rank
	if int64(len(send)) > e.o.MaxMessage {
		return nil, c.invalid("allgatherv of %d bytes exceeds the limit of %d (dist.WithMaxMessage)", len(send), e.o.MaxMessage)
	}
	if err := c.ready(); err != nil {
		return nil, err
	}
	out := make([][]byte, P)
	out[r] = append(make([]byte, 0, len(send)), send...)
	if P == 1 {
		return out, nil
	}
	c.algo = algoRing
	right, left := (r+1)%P, (r-1+P)%P
	seg := e.o.SegmentSize

	sendBlock := func(owner int, b []byte) error {
		size := uint64(len(b))
		if len(b) == 0 {
			return c.send(right, 0, uint32(owner), nil)
		}
		for s := 0; s < len(b); s += seg {
			if err := c.send(right, size, uint32(owner), b[s:min(s+seg, len(b))]); err != nil {
				return err
			}
		}
		return nil
	}
	if err := sendBlock(r, out[r]); err != nil {
		return nil, err
	}
	var at int64 // bytes received from left so far
	for i := range P - 1 {
		owner := ((r-i-1)%P + P) % P
		var blk []byte
		for off := 0; ; {
			f, err := c.recv(left)
			if err != nil {
				return nil, err
			}
			n := f.size()
			switch {
			case f.h.arg2 != uint32(owner):
				c.release(f)
				return nil, c.protocol(left, "block of rank %d where rank %d's was due", f.h.arg2, owner)
			case blk == nil && f.h.arg > uint64(e.o.MaxMessage):
				c.release(f)
				return nil, c.protocol(left, "block of %d bytes for rank %d exceeds the limit of %d", f.h.arg, owner, e.o.MaxMessage)
			case blk == nil:
				blk = make([]byte, f.h.arg)
				// The rest of the block can go straight into place.
				c.expect(left, at+int64(n), blk[min(n, len(blk)):])
			}
			if f.h.arg != uint64(len(blk)) || off+n > len(blk) || (n == 0 && len(blk) > 0) || (f.direct && off == 0) {
				c.release(f)
				return nil, c.protocol(left, "frame of %d bytes at offset %d of a %d-byte block (announced %d)", n, off, len(blk), f.h.arg)
			}
			if !f.direct {
				copy(blk[off:], f.payload())
			}
			c.release(f)
			if i < P-2 {
				if err := c.send(right, uint64(len(blk)), uint32(owner), blk[off:off+n]); err != nil {
					return nil, err
				}
			}
			at += int64(n)
			if off += n; off == len(blk) {
				break
			}
		}
		out[owner] = blk
	}
	if err := c.waitSends(); err != nil {
		return nil, err
	}
	return out, nil
}
