package engine

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/ssfusion/ssfusion/dist"
)

// link is the connection to one peer: a writer goroutine that owns the sending side (its
// queue, pacing, heartbeats and the last goodbye or abort frame) and a reader goroutine
// that decodes frames and files them into the engine's mailboxes, so that any number of
// collectives share the connection without waiting for one another.
type link struct {
	e     *Engine
	peer  int
	conn  net.Conn
	pacer *pacer // nil: unshaped

	mu     sync.Mutex
	queue  sendQueue
	mode   stopKind
	taken  bool   // the writer has acted on mode
	abort  []byte // the abort frame to send when mode is stopAbort
	wake   chan struct{}
	halt   chan struct{} // closed when a stop is requested
	abortc chan struct{} // closed when an abort is requested

	wg   sync.WaitGroup
	done chan struct{} // closed when reader and writer have stopped and conn is closed
}

type stopKind int

const (
	stopNone stopKind = iota
	stopGoodbye
	stopAbort
)

// outFrame is a data frame waiting for the writer. payload points into the collective's
// buffer, which stays untouched until the writer reports the frame done.
type outFrame struct {
	h       header
	payload []byte
	c       *coll
	post    *postSink     // posted once the frame is written
	done    chan struct{} // closed once the frame is written or dropped
	n       int           // the frame's index among its collective's; counted for fault hooks only
}

var errLinkDown = errors.New("dist: link stopped")

func newLink(e *Engine, peer int, conn net.Conn) *link {
	l := &link{
		e: e, peer: peer, conn: conn,
		wake:   make(chan struct{}, 1),
		halt:   make(chan struct{}),
		abortc: make(chan struct{}),
		done:   make(chan struct{}),
	}
	if e.o.Bandwidth > 0 {
		l.pacer = newPacer(e.o.Bandwidth)
	}
	return l
}

func (l *link) start() {
	l.wg.Add(2)
	go l.writeLoop()
	go l.readLoop()
	go func() {
		l.wg.Wait()
		l.conn.Close()
		close(l.done)
	}()
}

// enqueue hands a data frame to the writer; it fails when the link is stopping.
func (l *link) enqueue(f *outFrame) error {
	l.mu.Lock()
	if l.mode != stopNone {
		l.mu.Unlock()
		return errLinkDown
	}
	f.c.sends.Add(1)
	l.queue.push(f)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return nil
}

// stop asks the writer to end with a goodbye (this rank closes, or acknowledges the
// peer's goodbye) or with an abort frame (this rank failed). An abort overrides a goodbye
// that the writer has not acted on yet.
func (l *link) stop(mode stopKind, abort []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.mode == stopNone:
		close(l.halt)
	case mode == stopAbort && l.mode == stopGoodbye && !l.taken:
	default:
		return
	}
	l.mode, l.abort = mode, abort
	if mode == stopAbort {
		close(l.abortc)
		// A write stuck on a peer that does not read must not hold the failure up.
		l.conn.SetWriteDeadline(time.Now().Add(abortGrace))
	}
}

// armWrite sets the deadline of the next write; it reports false when an abort was
// requested, whose shorter deadline must stay: then no new frame starts, and the rest of
// a frame goes out at once, so that the abort frame can follow it.
func (l *link) armWrite() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mode == stopAbort {
		return false
	}
	if t := l.e.o.Timeout; t > 0 {
		l.conn.SetWriteDeadline(time.Now().Add(t))
	}
	return true
}

func (l *link) writeLoop() {
	defer l.wg.Done()
	every := l.e.o.HeartbeatEvery()
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	lastWrite := time.Now()
	broken := false // a write failed or stopped in the middle of a frame
	for {
		l.mu.Lock()
		if l.mode != stopNone {
			l.taken = true
			mode, abort := l.mode, l.abort
			pending := l.queue.drain()
			l.mu.Unlock()
			l.finish(mode, abort, pending, broken)
			return
		}
		f := l.queue.pop()
		l.mu.Unlock()
		if f != nil {
			err := errLinkDown
			if !broken {
				switch err = l.writeFrame(f); err {
				case nil, errLinkDown:
				case dist.ErrCrashed:
					broken = true // a crashed rank sends nothing more and blames nobody
				default:
					broken = true
					l.writeFailed(err)
				}
			}
			l.complete(f, err)
			lastWrite = time.Now()
			continue
		}
		if l.pacer != nil {
			l.pacer.idle = true
		}
		select {
		case <-l.wake:
		case <-l.halt:
		case <-tick:
			if time.Since(lastWrite) < every*9/10 {
				continue
			}
			if broken {
				continue
			}
			h := header{kind: frameHeartbeat, arg: uint64(l.e.oldestWait() + 1)}
			if err := l.writeControl(h, nil); err != nil && err != errLinkDown {
				broken = true
				l.writeFailed(err)
			}
			lastWrite = time.Now()
		}
	}
}

// complete reports a frame written (err nil) or dropped to its collective.
func (l *link) complete(f *outFrame, err error) {
	if err == nil && f.post != nil {
		f.c.expect(f.post.peer, f.post.at, f.post.dst)
	}
	close(f.done)
	f.c.sendDone(err)
}

// finish ends the writer: it drops the queued frames and sends the last frame.
func (l *link) finish(mode stopKind, abort []byte, pending []*outFrame, broken bool) {
	if len(pending) > 0 && mode == stopGoodbye {
		// The peer left, or this rank is closing, while frames still had to go: a
		// fault of the peer in the first case (recorded before the collectives see
		// their send fail), nothing in the second.
		l.e.linkDown(l.peer)
	}
	for _, f := range pending {
		l.complete(f, errLinkDown)
	}
	switch mode {
	case stopGoodbye:
		if !broken {
			l.writeControl(header{kind: frameGoodbye}, nil)
		}
		// The reader ends the link when the peer's goodbye or EOF arrives.
	case stopAbort:
		if !broken {
			l.conn.SetWriteDeadline(time.Now().Add(abortGrace))
			if _, err := l.conn.Write(abort); err == nil {
				l.e.stats.CtlSent.Add(int64(len(abort)))
			}
		}
		l.conn.Close()
	}
}

// writeFailed records a failed write as the peer's fault unless the link was stopping.
// A broken connection is usually the peer's reaction to a failure elsewhere: it sent an
// abort frame naming the real culprit before it closed, which the reader may not have
// handled yet. So the writer gives the reader a moment before it blames the peer, and
// holds its frames meanwhile, so that no collective fails before the fault is known.
func (l *link) writeFailed(err error) {
	l.mu.Lock()
	stopping := l.mode != stopNone
	l.mu.Unlock()
	if stopping {
		l.e.linkDown(l.peer)
		return
	}
	if isTimeout(err) {
		l.e.Fail(Fault{Rank: l.peer, Reporter: l.e.rank,
			Cause: fmt.Errorf("%w: did not read for %v", dist.ErrTimeout, l.e.o.Timeout)})
		return
	}
	t := time.NewTimer(abortGrace)
	select {
	case <-l.e.failed:
	case <-l.e.closing:
	case <-l.done:
	case <-t.C:
	}
	t.Stop()
	l.e.Fail(Fault{Rank: l.peer, Reporter: l.e.rank, Cause: fmt.Errorf("%w: write: %v", dist.ErrConnLost, err)})
}

func (l *link) writeFrame(f *outFrame) error {
	var hdr [HeaderSize]byte
	f.h.put(hdr[:])
	if !l.armWrite() {
		return errLinkDown
	}
	var err error
	if hook := l.e.o.FaultHook; hook != nil {
		err = l.writeHooked(hook, f, hdr[:])
	} else {
		err = l.write(hdr[:], f.payload)
	}
	if err != nil {
		return err
	}
	n := int64(HeaderSize + len(f.payload))
	s := &l.e.stats
	s.Sent.Add(n)
	s.framesSent.Add(1)
	s.Ops[f.c.kind].Sent.Add(n)
	return nil
}

// writeHooked writes a data frame in two parts, calling the fault hook before the
// frame, between the parts and after it; it stops at the first point where the hook
// crashes the rank or resets its connections.
func (l *link) writeHooked(hook dist.FaultHook, f *outFrame, hdr []byte) error {
	ev := dist.FaultEvent{Rank: l.e.rank, Peer: l.peer, Collective: f.c.kind.String(), Seq: f.c.seq - l.e.seqBase, N: f.n}
	at := func(p dist.FaultPoint) error {
		ev.Point = p
		switch hook(ev) {
		case dist.FaultCrash:
			l.e.Kill()
			return dist.ErrCrashed
		case dist.FaultReset:
			l.e.Reset()
			return dist.ErrReset
		}
		return nil
	}
	half := len(f.payload) / 2
	if err := at(dist.FaultBeforeSend); err != nil {
		return err
	}
	if err := l.write(hdr, f.payload[:half]); err != nil {
		return err
	}
	if err := at(dist.FaultPartialFrame); err != nil {
		return err
	}
	if err := l.write(f.payload[half:]); err != nil {
		return err
	}
	return at(dist.FaultAfterSend)
}

func (l *link) writeControl(h header, payload []byte) error {
	var hdr [HeaderSize]byte
	h.put(hdr[:])
	if !l.armWrite() {
		return errLinkDown
	}
	err := l.write(hdr[:], payload)
	if err == nil {
		l.e.stats.CtlSent.Add(int64(HeaderSize + len(payload)))
	}
	return err
}

// write writes parts in order, paced on a shaped link.
func (l *link) write(parts ...[]byte) error {
	if l.pacer != nil {
		return l.writePaced(parts...)
	}
	return l.writeParts(parts...)
}

// writeParts writes parts in one call where the conn supports it (writev). Empty parts are
// left out: on a synchronous pipe even an empty write waits for a reader, which may
// already be gone.
func (l *link) writeParts(parts ...[]byte) error {
	bufs := make(net.Buffers, 0, len(parts))
	for _, p := range parts {
		if len(p) > 0 {
			bufs = append(bufs, p)
		}
	}
	switch len(bufs) {
	case 0:
		return nil
	case 1:
		_, err := l.conn.Write(bufs[0])
		return err
	}
	_, err := bufs.WriteTo(l.conn)
	return err
}

// writePaced writes parts piece by piece, each when the emulated cable has carried the
// previous ones. Once an abort is requested, the rest goes out unpaced.
func (l *link) writePaced(parts ...[]byte) error {
	for _, p := range parts {
		for len(p) > 0 {
			n := min(len(p), l.pacer.quantum)
			if l.pacer.wait(n, l.abortc) {
				l.armWrite()
			} else {
				n = len(p)
			}
			if _, err := l.conn.Write(p[:n]); err != nil {
				return err
			}
			p = p[n:]
		}
	}
	return nil
}
