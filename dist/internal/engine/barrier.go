package engine

// Barrier implements dist.Communicator.
func (e *Engine) Barrier() error {
	c, err := e.begin(CollBarrier)
	if err != nil {
		return err
	}
	return c.end(c.barrier())
}

// barrier is the dissemination barrier: in round k every rank signals rank r+2^k and
// waits for rank r-2^k; after ceil(log2 P) rounds every rank has heard, directly or not,
// from every other.
func (c *coll) barrier() error {
	e := c.e
	P, r := e.size, e.rank
	if err := c.ready(); err != nil {
		return err
	}
	c.algo = algoDissemination
	for k, d := 0, 1; d < P; k, d = k+1, d*2 {
		if err := c.send((r+d)%P, uint64(k), 0, nil); err != nil {
			return err
		}
		from := (r - d + P) % P
		f, err := c.recv(from)
		if err != nil {
			return err
		}
		n := len(f.payload())
		c.release(f)
		if f.h.arg != uint64(k) || n != 0 {
			return c.protocol(from, "barrier frame for round %d with %d bytes in round %d", f.h.arg, n, k)
		}
	}
	return c.waitSends()
}
