package engine

import "time"

type boxKey struct {
	peer int
	seq  uint64
}

// mailbox holds the frames one peer sent for one collective, in arrival order, until
// the collective consumes them.
//
// A collective that knows where some of the peer's bytes belong posts sinks: byte ranges
// of the peer's stream for this collective (counted from its first frame) with their
// destination. The reader then reads those payloads straight into place instead of
// into a pooled buffer that the collective would copy, which saves a pass over memory in
// the copying phases (ring allgather, broadcast, allgatherv).
type mailbox struct {
	frames   []rxFrame
	notify   chan struct{} // capacity 1: a frame arrived
	arrived  int64         // payload bytes whose header has been read
	sinks    []sink
	inflight int // payloads being read into a sink; the collective may not end before 0
}

type sink struct {
	at   int64 // stream offset of dst[0]
	dst  []byte
	coll uint8 // frames of another collective or algorithm are not let in
	algo algo
}

type rxFrame struct {
	h      header
	buf    *[]byte // pooled; nil for an empty payload or a direct one
	direct bool    // the payload was read into the sink posted for it
}

// payload returns the frame's bytes; nil for a direct frame, whose bytes are in place.
func (f rxFrame) payload() []byte {
	if f.buf == nil {
		return nil
	}
	return *f.buf
}

// size is the payload length, direct or not.
func (f rxFrame) size() int { return int(f.h.length) }

type waiter struct{ since time.Time }

// box returns the mailbox of k, creating it; e.mu must be held.
func (e *Engine) box(k boxKey) *mailbox {
	b := e.boxes[k]
	if b == nil {
		b = &mailbox{notify: make(chan struct{}, 1)}
		e.boxes[k] = b
	}
	return b
}

// arrive is called by the reader when a data frame's header has been read: it checks
// that the frame belongs to an issued or future collective and returns the sink its
// payload goes to, or nil for a pooled buffer.
func (e *Engine) arrive(peer int, h header) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.flt != nil {
		return nil, nil
	}
	switch {
	case h.seq <= e.seq && !e.active[h.seq]:
		return nil, MismatchErr("sent %s data for #%d, which this rank had already finished",
			describe(h.coll, h.algo, h.arg, h.arg2), h.seq)
	case h.seq > e.seq+1<<20:
		return nil, ProtocolErr("data frame for collective #%d, more than 2^20 ahead of this rank's #%d", h.seq, e.seq)
	}
	b := e.box(boxKey{peer, h.seq})
	start, n := b.arrived, int64(h.length)
	b.arrived += n
	if n == 0 {
		return nil, nil
	}
	var dst []byte
	live := b.sinks[:0] // the stream only moves forward: sinks behind it are dropped
	for _, s := range b.sinks {
		end := s.at + int64(len(s.dst))
		if dst == nil && start >= s.at && start+n <= end && h.coll == s.coll && h.algo == s.algo {
			dst = s.dst[start-s.at : start-s.at+n]
		}
		if end > start+n {
			live = append(live, s)
		}
	}
	clear(b.sinks[len(live):])
	b.sinks = live
	if dst != nil {
		b.inflight++
	}
	return dst, nil
}

// deliver files a data frame from peer, whose payload has been read, into its mailbox.
func (e *Engine) deliver(peer int, h header, buf *[]byte, direct bool) {
	k := boxKey{peer, h.seq}
	e.mu.Lock()
	b := e.boxes[k]
	if direct {
		e.releaseSinkLocked(b)
	}
	if e.closed || e.flt != nil {
		e.mu.Unlock()
		e.pool.put(buf)
		return
	}
	if b == nil {
		// The collective ended between header and payload: this frame was not due.
		e.mu.Unlock()
		e.pool.put(buf)
		e.Fail(Fault{Rank: peer, Reporter: e.rank, Cause: MismatchErr(
			"sent %s data for #%d, which this rank had already finished", describe(h.coll, h.algo, h.arg, h.arg2), h.seq)})
		return
	}
	b.frames = append(b.frames, rxFrame{h: h, buf: buf, direct: direct})
	e.mu.Unlock()
	select {
	case b.notify <- struct{}{}:
	default:
	}
}

// releaseSink ends a read into one of k's sinks that will not be delivered.
func (e *Engine) releaseSink(k boxKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.releaseSinkLocked(e.boxes[k])
}

// releaseSinkLocked ends a read into one of b's sinks; the collective waits for it before
// it ends, so b is still there.
func (e *Engine) releaseSinkLocked(b *mailbox) {
	if b == nil {
		return
	}
	if b.inflight--; b.inflight == 0 {
		e.sinkIO.Broadcast()
	}
}

// peerLeft records a goodbye from peer. Everything the peer sent before is already in
// the mailboxes; a collective that still needs more from it fails when it finds the
// mailbox empty (see recv), so the waiting ones are woken to look.
func (e *Engine) peerLeft(peer int) {
	e.mu.Lock()
	e.left[peer] = true
	for k, b := range e.boxes {
		if k.peer == peer {
			select {
			case b.notify <- struct{}{}:
			default:
			}
		}
	}
	e.mu.Unlock()
	e.links[peer].stop(stopGoodbye, nil)
}
