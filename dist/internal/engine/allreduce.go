package engine

import (
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/wire"
)

// AllReduce implements dist.Communicator.
func (e *Engine) AllReduce(buf []float32, op dist.Op) error {
	c, err := e.begin(CollAllReduce)
	if err != nil {
		return err
	}
	return c.end(c.allReduce(buf, op))
}

// AllReduceAsync implements dist.Communicator.
func (e *Engine) AllReduceAsync(buf []float32, op dist.Op) dist.Handle {
	c, err := e.begin(CollAllReduce)
	if err != nil {
		return FailedHandle(err)
	}
	h := NewHandle()
	go func() { h.Finish(nil, c.end(c.allReduce(buf, op))) }()
	return h
}

// allReduce picks the algorithm from the buffer size alone, so that every rank picks the
// same one.
func (c *coll) allReduce(buf []float32, op dist.Op) error {
	e := c.e
	c.op, c.arg = op, uint64(len(buf))
	if op != dist.Sum && op != dist.Average {
		return c.invalid("allreduce op %v is neither dist.Sum nor dist.Average", op)
	}
	if err := c.ready(); err != nil {
		return err
	}
	if e.size == 1 || len(buf) == 0 {
		return nil
	}
	if len(buf)*4 <= e.o.SmallThreshold {
		c.algo = algoRecDoubling
		return c.allReduceRD(buf, op)
	}
	c.algo = algoRing
	return c.allReduceRing(buf, op)
}

// allReduceRD is recursive doubling, for small buffers: log2(P) rounds of whole-buffer
// exchanges. With P not a power of two, the first 2*(P-p2) ranks pair up first (the even
// one hands its buffer to the odd one and gets the result back at the end).
//
// Bit identity: in every round both partners compute lower + upper, the partial sum of
// the group of lower ranks first, so every participating rank evaluates the same
// expression tree with the same operand order, and the others receive a copy.
func (c *coll) allReduceRD(buf []float32, op dist.Op) error {
	e := c.e
	P, r := e.size, e.rank
	p2 := 1
	for p2*2 <= P {
		p2 *= 2
	}
	rem := P - p2
	want := len(buf) * 4
	recvInto := func(peer int, combine func(theirs []float32)) error {
		f, err := c.recv(peer)
		if err != nil {
			return err
		}
		defer c.release(f)
		if len(f.payload()) != want {
			return c.protocol(peer, "%d payload bytes where %d were due", len(f.payload()), want)
		}
		combine(wire.BytesF32(f.payload(), e.le))
		return nil
	}

	var v int // rank among the p2 participants
	switch {
	case r < 2*rem && r%2 == 0:
		if err := c.send(r+1, c.arg, 0, wire.F32Bytes(buf, e.le)); err != nil {
			return err
		}
		if err := c.waitSends(); err != nil {
			return err
		}
		return recvInto(r+1, func(res []float32) { copy(buf, res) })
	case r < 2*rem:
		if err := recvInto(r-1, func(lo []float32) { wire.SumInto(buf, lo, buf) }); err != nil {
			return err
		}
		v = r / 2
	default:
		v = r - rem
	}
	rankOf := func(v int) int {
		if v < rem {
			return 2*v + 1
		}
		return v + rem
	}
	for mask := 1; mask < p2; mask <<= 1 {
		pv := v ^ mask
		peer := rankOf(pv)
		if err := c.send(peer, c.arg, 0, wire.F32Bytes(buf, e.le)); err != nil {
			return err
		}
		f, err := c.recv(peer)
		if err != nil {
			return err
		}
		if len(f.payload()) != want {
			c.release(f)
			return c.protocol(peer, "%d payload bytes where %d were due", len(f.payload()), want)
		}
		// Our own frame may still point into buf: let it go before buf changes.
		if err := c.waitSends(); err != nil {
			c.release(f)
			return err
		}
		theirs := wire.BytesF32(f.payload(), e.le)
		if v < pv {
			wire.SumInto(buf, buf, theirs)
		} else {
			wire.SumInto(buf, theirs, buf)
		}
		c.release(f)
	}
	if op == dist.Average {
		wire.DivideBy(buf, float32(P))
	}
	if r < 2*rem {
		if err := c.send(r-1, c.arg, 0, wire.F32Bytes(buf, e.le)); err != nil {
			return err
		}
	}
	return c.waitSends()
}

// allReduceRing is the bandwidth-optimal ring: a reduce-scatter then an allgather, each
// of P-1 steps over the ring r -> r+1, every rank sending 2(P-1)/P of the buffer. The
// buffer is cut into P chunks; at step i rank r sends chunk r-i and receives chunk r-i-1
// from its left neighbour, adding it to its own during the first P-1 steps and copying
// it during the last P-1. What a rank forwards at step i+1 is exactly what it received at
// step i, so the steps run as one stream, pipelined frame by frame.
//
// Bit identity: chunk c is summed once, along the ring from rank c to rank c-1, each rank
// computing (partial from the left) + (own), then averaged by rank c-1, and only copied
// afterwards. The result does not depend on timing or frame sizes.
func (c *coll) allReduceRing(buf []float32, op dist.Op) error {
	e := c.e
	P, r := e.size, e.rank
	right, left := (r+1)%P, (r-1+P)%P
	n := len(buf)
	chunk := func(ch int) (lo, hi int) { return ch * n / P, (ch + 1) * n / P }
	seg := e.o.SegmentSize / 4

	steps := 2 * (P - 1)
	mod := func(x int) int { return (x%P + P) % P }
	base := make([]int64, steps+1) // offset of each step's first byte in the stream from left
	for i := range steps {
		lo, hi := chunk(mod(r - i - 1))
		base[i+1] = base[i] + int64(hi-lo)*4
	}
	// The allgather half only copies, so the reader may put its frames in place. A
	// chunk's final value can only come back after this rank has sent its own part of
	// that chunk; sendTracked makes that order explicit, segment by segment.
	pending := make([][]*outFrame, P) // frames reading from a chunk that comes back
	sendTracked := func(ch, from, to int) error {
		i0 := mod(r - ch - 1) // the step at which chunk ch first arrives
		ag := i0 + P          // and the step at which it comes back, if it does
		if ch == r {
			ag = P - 1
		}
		payload := wire.F32Bytes(buf[from:to], e.le)
		if ag > steps-1 || !e.le {
			return c.send(right, c.arg, 0, payload)
		}
		lo, _ := chunk(ch)
		then := &postSink{peer: left, at: base[ag] + int64(from-lo)*4, dst: payload}
		f, err := c.sendThen(right, c.arg, 0, payload, then)
		if err == nil {
			pending[ch] = append(pending[ch], f)
		}
		return err
	}
	lo, hi := chunk(r)
	for s := lo; s < hi; s += seg {
		if err := sendTracked(r, s, min(s+seg, hi)); err != nil {
			return err
		}
	}
	for i := range steps {
		ch := mod(r - i - 1)
		lo, hi := chunk(ch)
		for off := lo; off < hi; {
			f, err := c.recv(left)
			if err != nil {
				return err
			}
			k := f.size() / 4
			if f.size()%4 != 0 || k == 0 || off+k > hi || (f.direct && i < P-1) {
				c.release(f)
				return c.protocol(left, "frame of %d bytes at element %d of a chunk ending at %d", f.size(), off, hi)
			}
			dst := buf[off : off+k]
			switch p := f.payload(); {
			case i < P-1:
				wire.SumInto(dst, wire.BytesF32(p, e.le), dst)
				if i == P-2 && op == dist.Average {
					wire.DivideBy(dst, float32(P)) // this rank holds the chunk's final sum
				}
			case f.direct:
			default:
				for _, w := range pending[ch] {
					<-w.done // our own frames have read this chunk
				}
				pending[ch] = nil
				copy(dst, wire.BytesF32(p, e.le))
			}
			c.release(f)
			switch {
			case i < P-1:
				err = sendTracked(ch, off, off+k)
			case i < steps-1:
				err = c.send(right, c.arg, 0, wire.F32Bytes(dst, e.le))
			}
			if err != nil {
				return err
			}
			off += k
		}
	}
	return c.waitSends()
}
