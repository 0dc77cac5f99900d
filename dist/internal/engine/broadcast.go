package engine

import "github.com/ssfusion/ssfusion/dist"

// Broadcast implements dist.Communicator.
func (e *Engine) Broadcast(buf []byte, root int) error {
	c, err := e.begin(CollBroadcast)
	if err != nil {
		return err
	}
	return c.end(c.broadcast(buf, root))
}

// BroadcastAsync implements dist.Communicator.
func (e *Engine) BroadcastAsync(buf []byte, root int) dist.Handle {
	c, err := e.begin(CollBroadcast)
	if err != nil {
		return FailedHandle(err)
	}
	h := NewHandle()
	go func() { h.Finish(nil, c.end(c.broadcast(buf, root))) }()
	return h
}

// broadcast sends small buffers down a binomial tree (log2 P rounds) and large ones down
// a chain root -> root+1 -> ... -> root-1, pipelined frame by frame, so that each link
// carries the buffer once and the time is about m * beta plus one frame per hop.
func (c *coll) broadcast(buf []byte, root int) error {
	e := c.e
	P := e.size
	c.arg, c.arg2 = uint64(len(buf)), uint32(root)
	if root < 0 || root >= P {
		return c.invalid("broadcast root %d outside [0, %d)", root, P)
	}
	if err := c.ready(); err != nil {
		return err
	}
	if P == 1 || len(buf) == 0 {
		return nil
	}
	v := (e.rank - root + P) % P // rank relative to the root
	rankOf := func(v int) int { return (v + root) % P }
	if len(buf) <= e.o.SmallThreshold {
		c.algo = algoTree
		return c.broadcastTree(buf, v, rankOf)
	}
	c.algo = algoChain
	return c.broadcastChain(buf, v, rankOf)
}

func (c *coll) broadcastTree(buf []byte, v int, rankOf func(int) int) error {
	P := c.e.size
	mask := 1
	for ; mask < P; mask <<= 1 {
		if v&mask == 0 {
			continue
		}
		parent := rankOf(v - mask)
		c.expect(parent, 0, buf)
		f, err := c.recv(parent)
		if err != nil {
			return err
		}
		if f.size() != len(buf) {
			c.release(f)
			return c.protocol(parent, "%d payload bytes where %d were due", f.size(), len(buf))
		}
		if !f.direct {
			copy(buf, f.payload())
		}
		c.release(f)
		break
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if v+mask < P {
			if err := c.send(rankOf(v+mask), c.arg, c.arg2, buf); err != nil {
				return err
			}
		}
	}
	return c.waitSends()
}

func (c *coll) broadcastChain(buf []byte, v int, rankOf func(int) int) error {
	P, seg := c.e.size, c.e.o.SegmentSize
	next, prev := rankOf(v+1), rankOf(v-1+P)
	if v == 0 {
		for s := 0; s < len(buf); s += seg {
			if err := c.send(next, c.arg, c.arg2, buf[s:min(s+seg, len(buf))]); err != nil {
				return err
			}
		}
		return c.waitSends()
	}
	c.expect(prev, 0, buf)
	for off := 0; off < len(buf); {
		f, err := c.recv(prev)
		if err != nil {
			return err
		}
		n := f.size()
		if n == 0 || off+n > len(buf) {
			c.release(f)
			return c.protocol(prev, "frame of %d bytes at offset %d of %d", n, off, len(buf))
		}
		if !f.direct {
			copy(buf[off:], f.payload())
		}
		c.release(f)
		if v < P-1 {
			if err := c.send(next, c.arg, c.arg2, buf[off:off+n]); err != nil {
				return err
			}
		}
		off += n
	}
	return c.waitSends()
}
