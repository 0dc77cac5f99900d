package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ssfusion/ssfusion/dist"
)

// coll is one collective in progress on this rank.
type coll struct {
	e     *Engine
	kind  CollKind
	op    dist.Op
	algo  algo
	seq   uint64
	arg   uint64 // size of the collective, checked on every frame of kinds with a fixed size
	arg2  uint32 // root of a broadcast
	start time.Time

	sends  sync.WaitGroup // frames queued and not yet written
	smu    sync.Mutex
	serr   error
	queued atomic.Int32 // data frames queued so far; counted for fault hooks only
}

// begin issues the next collective. Its sequence number is taken here, in the caller's
// goroutine, which is what matches collectives across ranks.
func (e *Engine) begin(k CollKind) (*coll, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, fmt.Errorf("dist: %v: %w", k, dist.ErrClosed)
	}
	e.seq++
	c := &coll{e: e, kind: k, seq: e.seq, start: time.Now()}
	e.active[c.seq] = true
	e.colls.Add(1)
	e.stats.Ops[k].Calls.Add(1)
	e.stats.Busy.Start(c.start)
	return c, nil
}

func (c *coll) code() uint8 { return uint8(c.kind) | uint8(c.op)<<4 }

// ready fails early when the communicator is already broken.
func (c *coll) ready() error {
	select {
	case <-c.e.failed:
		return ErrAborted
	default:
		return nil
	}
}

// invalid breaks the communicator for a bad argument of this rank, so that the peers
// learn of it at once instead of timing out.
func (c *coll) invalid(format string, args ...any) error {
	c.e.Fail(Fault{Rank: c.e.rank, Reporter: c.e.rank,
		Cause: fmt.Errorf("%w: "+format, append([]any{dist.ErrInvalid}, args...)...)})
	return ErrAborted
}

// end finishes the collective: it frees its mailboxes, counts it, and turns an internal
// error into the one the caller sees.
func (c *coll) end(err error) error {
	e := c.e
	if err != nil {
		// Frames still queued point into the caller's buffers. A failure stops the
		// links, which drop their queues, so this wait is short.
		c.sends.Wait()
	}
	var stray *Fault
	e.mu.Lock()
	delete(e.active, c.seq)
	// No reader may still write into this collective's buffers once it returns.
	for p := range e.size {
		if b := e.boxes[boxKey{p, c.seq}]; b != nil {
			b.sinks = nil
			for b.inflight > 0 {
				e.sinkIO.Wait()
			}
		}
	}
	for p := range e.size {
		k := boxKey{p, c.seq}
		b := e.boxes[k]
		if b == nil {
			continue
		}
		if len(b.frames) > 0 && err == nil && stray == nil {
			stray = &Fault{Rank: p, Reporter: e.rank, Cause: MismatchErr(
				"sent %s data that this rank's %v #%d did not expect", describe(b.frames[0].h.coll, b.frames[0].h.algo, b.frames[0].h.arg, b.frames[0].h.arg2), c.kind, c.seq-e.seqBase)}
		}
		for _, f := range b.frames {
			e.pool.put(f.buf)
		}
		delete(e.boxes, k)
	}
	flt, closed := e.flt, e.closed
	e.mu.Unlock()
	if stray != nil {
		e.Fail(*stray)
		err, flt = ErrAborted, e.Fault()
	}

	if err != nil {
		switch {
		case flt != nil:
			err = &dist.PeerError{Rank: flt.Rank, Op: c.kind.String(), Seq: c.seq - e.seqBase,
				Reporter: flt.Reporter, Self: e.rank, Err: flt.Cause}
		case closed:
			err = fmt.Errorf("dist: %v #%d: %w", c.kind, c.seq-e.seqBase, dist.ErrClosed)
		default:
			// Every failure path records a fault first; this is a safety net so that
			// the peers are told whatever happened.
			e.Fail(Fault{Rank: e.rank, Reporter: e.rank, Cause: err})
			err = &dist.PeerError{Rank: e.rank, Op: c.kind.String(), Seq: c.seq - e.seqBase,
				Reporter: e.rank, Self: e.rank, Err: err}
		}
		e.stats.Ops[c.kind].Failed.Add(1)
	}
	now := time.Now()
	e.stats.Ops[c.kind].Nanos.Add(int64(now.Sub(c.start)))
	e.stats.Busy.End(now)
	e.colls.Done()
	return err
}

// send queues payload for peer; the caller must leave payload untouched until waitSends.
func (c *coll) send(peer int, arg uint64, arg2 uint32, payload []byte) error {
	_, err := c.sendThen(peer, arg, arg2, payload, nil)
	return err
}

// sendThen is send for a payload whose memory will receive data later in the
// collective. Once the frame is written, the writer posts then (if not nil) as a sink and
// closes the frame's done channel: a reader may put data there only after the writer has
// read it, and the collective waits on done before it writes there itself. The
// happens-before edges matter to the race detector too, which cannot see that the data
// coming back causally follows the data sent.
func (c *coll) sendThen(peer int, arg uint64, arg2 uint32, payload []byte, then *postSink) (*outFrame, error) {
	f := &outFrame{
		h: header{kind: frameData, coll: c.code(), algo: c.algo, length: uint32(len(payload)),
			seq: c.seq, arg: arg, arg2: arg2},
		payload: payload,
		c:       c,
		post:    then,
		done:    make(chan struct{}),
	}
	if c.e.o.FaultHook != nil {
		f.n = int(c.queued.Add(1)) - 1
	}
	if err := c.e.links[peer].enqueue(f); err != nil {
		c.e.linkDown(peer)
		return nil, ErrAborted
	}
	return f, nil
}

// postSink is a sink to post once a frame is written.
type postSink struct {
	peer int
	at   int64
	dst  []byte
}

func (c *coll) sendDone(err error) {
	if err != nil {
		c.smu.Lock()
		if c.serr == nil {
			c.serr = err
		}
		c.smu.Unlock()
	}
	c.sends.Done()
}

// waitSends blocks until every frame queued so far is written (or dropped because the
// link went down): only then may the buffers they point into change. It is bounded: a
// link that stops drops its queue, and a stuck write hits its deadline or a forced close.
func (c *coll) waitSends() error {
	c.sends.Wait()
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.serr != nil {
		return ErrAborted
	}
	return nil
}

// recv returns the next frame peer sent for this collective, after checking that it
// belongs to the same collective with the same arguments.
func (c *coll) recv(peer int) (rxFrame, error) {
	e := c.e
	key := boxKey{peer, c.seq}
	var w *waiter
	for {
		e.mu.Lock()
		if w != nil {
			delete(e.waits[peer], w)
			w = nil
		}
		if e.flt != nil || e.closed {
			e.mu.Unlock()
			return rxFrame{}, ErrAborted
		}
		b := e.boxes[key]
		if b != nil && len(b.frames) > 0 {
			f := b.frames[0]
			b.frames[0] = rxFrame{}
			b.frames = b.frames[1:]
			e.mu.Unlock()
			if err := c.check(peer, f.h); err != nil {
				e.pool.put(f.buf)
				return rxFrame{}, err
			}
			return f, nil
		}
		if e.left[peer] {
			e.mu.Unlock()
			e.Fail(Fault{Rank: peer, Reporter: e.rank, Cause: dist.ErrPeerClosed})
			return rxFrame{}, ErrAborted
		}
		b = e.box(key)
		w = &waiter{since: time.Now()}
		e.waits[peer][w] = struct{}{}
		e.mu.Unlock()
		select {
		case <-b.notify:
		case <-e.failed:
		case <-e.closing:
		}
	}
}

// check compares a frame with this rank's own collective.
func (c *coll) check(peer int, h header) error {
	ok := h.coll == c.code() && h.algo == c.algo
	if ok && (c.kind == CollAllReduce || c.kind == CollBroadcast) {
		ok = h.arg == c.arg && h.arg2 == c.arg2
	}
	if ok {
		return nil
	}
	c.e.Fail(Fault{Rank: peer, Reporter: c.e.rank, Cause: MismatchErr("issued %s as #%d where this rank issued %s",
		describe(h.coll, h.algo, h.arg, h.arg2), c.seq-c.e.seqBase, describe(c.code(), c.algo, c.arg, c.arg2))})
	return ErrAborted
}

// release returns a received frame's buffer to the pool.
func (c *coll) release(f rxFrame) { c.e.pool.put(f.buf) }

// protocol breaks the communicator for a frame of peer that makes no sense here.
func (c *coll) protocol(peer int, format string, args ...any) error {
	c.e.Fail(Fault{Rank: peer, Reporter: c.e.rank, Cause: ProtocolErr(format, args...)})
	return ErrAborted
}

// expect posts dst as the destination of the bytes [at, at+len(dst)) of what peer sends
// in this collective. The caller must not touch dst until the frames that fill it are
// received, nor rely on it being filled: frames that arrived before the post, or that do
// not fit a sink whole, come as ordinary frames.
func (c *coll) expect(peer int, at int64, dst []byte) {
	if len(dst) == 0 {
		return
	}
	e := c.e
	e.mu.Lock()
	defer e.mu.Unlock()
	b := e.box(boxKey{peer, c.seq})
	b.sinks = append(b.sinks, sink{at: at, dst: dst, coll: c.code(), algo: c.algo})
}
