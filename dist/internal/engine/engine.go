package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/wire"
)

// Engine is the dist.Communicator of both transports: one rank with a link to every peer (any
// net.Conn: TCP sockets or in-process pipes), a mailbox that sorts incoming data frames by
// (peer, collective sequence number), a monitor of silent peers, and the failure state.
type Engine struct {
	rank, size int
	o          dist.Options
	log        *slog.Logger
	links      []*link // by peer; nil at rank
	le         bool    // float32 slices go on the wire as they are (little-endian host)

	mu     sync.Mutex
	sinkIO *sync.Cond      // on mu: signalled when a mailbox's inflight drops to 0
	seq    uint64          // last issued collective
	active map[uint64]bool // issued and not yet ended
	boxes  map[boxKey]*mailbox
	waits  []map[*waiter]struct{} // per peer: receives blocked on it
	left   []bool                 // peer said goodbye
	closed bool
	killed bool // kill was called: this rank reports nothing, like a crashed process
	flt    *Fault

	failed  chan struct{} // closed at the first fault
	closing chan struct{} // closed when Close starts
	done    chan struct{} // closed when Close has finished

	lastAny     []atomic.Int64 // per peer: unix nanos of the last bytes received
	lastData    []atomic.Int64 // per peer: unix nanos of the last data frame received
	peerWaiting []atomic.Int32 // per peer: the rank it last said it waits on, -1: none

	// The job's setup runs collectives of its own (agreeing on shared memory); the
	// caller's collectives are numbered, and its statistics counted, after them.
	seqBase   uint64
	statsBase dist.Stats

	colls sync.WaitGroup // collectives in progress
	bg    sync.WaitGroup // the monitor
	stats Counters
	pool  bufPool
}

// Counters are the traffic and time counters of one rank.
type Counters struct {
	Sent, Recv, framesSent, FramesRecv, CtlSent, CtlRecv atomic.Int64
	Direct                                               atomic.Int64 // frames read straight into place
	Ops                                                  [NumColl]OpCounters
	Busy                                                 BusyClock
}

// OpCounters are the counters of one kind of collective.
type OpCounters struct {
	Calls, Failed, Nanos, Sent, Recv atomic.Int64
}

// snapshot reads the counters into a dist.Stats; a backend that sends no frames leaves them at 0.
func (s *Counters) Snapshot() dist.Stats {
	op := func(k CollKind) dist.OpStats {
		c := &s.Ops[k]
		return dist.OpStats{Calls: c.Calls.Load(), Failed: c.Failed.Load(), Time: time.Duration(c.Nanos.Load()),
			BytesSent: c.Sent.Load(), BytesRecv: c.Recv.Load()}
	}
	return dist.Stats{
		BytesSent: s.Sent.Load(), BytesRecv: s.Recv.Load(),
		FramesSent: s.framesSent.Load(), FramesRecv: s.FramesRecv.Load(),
		ControlBytesSent: s.CtlSent.Load(), ControlBytesRecv: s.CtlRecv.Load(),
		AllReduce: op(CollAllReduce), AllGatherV: op(CollAllGatherV), AllToAllV: op(CollAllToAllV), SendRecv: op(CollSendRecv),
		Broadcast: op(CollBroadcast), Barrier: op(CollBarrier),
		Busy: s.Busy.Busy(time.Now()),
	}
}

// New starts rank's engine over conns (conns[p] reaches peer p; conns[rank] is
// nil). It owns the conns from then on.
func New(rank, size int, conns []net.Conn, o dist.Options) *Engine {
	e := &Engine{
		rank: rank, size: size, o: o, log: o.Logger, le: wire.NativeLE,
		links:       make([]*link, size),
		active:      make(map[uint64]bool),
		boxes:       make(map[boxKey]*mailbox),
		waits:       make([]map[*waiter]struct{}, size),
		left:        make([]bool, size),
		failed:      make(chan struct{}),
		closing:     make(chan struct{}),
		done:        make(chan struct{}),
		lastAny:     make([]atomic.Int64, size),
		lastData:    make([]atomic.Int64, size),
		peerWaiting: make([]atomic.Int32, size),
	}
	e.sinkIO = sync.NewCond(&e.mu)
	now := time.Now().UnixNano()
	for p := range size {
		e.waits[p] = make(map[*waiter]struct{})
		e.lastAny[p].Store(now)
		e.lastData[p].Store(now)
		e.peerWaiting[p].Store(-1)
	}
	for p, c := range conns {
		if p != rank && c != nil {
			e.links[p] = newLink(e, p, c)
		}
	}
	for _, l := range e.links {
		if l != nil {
			l.start()
		}
	}
	if o.Timeout > 0 && size > 1 {
		e.bg.Add(1)
		go e.monitor()
	}
	return e
}

func (e *Engine) Rank() int { return e.rank }

func (e *Engine) Size() int { return e.size }

// linkDown is called when a frame cannot be queued for peer: the link stopped because of
// a fault, because this rank is closing, or because the peer left.
func (e *Engine) linkDown(peer int) {
	e.mu.Lock()
	left := e.left[peer]
	e.mu.Unlock()
	if left {
		e.Fail(Fault{Rank: peer, Reporter: e.rank, Cause: dist.ErrPeerClosed})
	}
}

// fail records the first fault, wakes every waiting collective and tells the peers, so
// that every rank fails instead of waiting for data that will not come. Faults after
// Close started are ignored.
func (e *Engine) Fail(f Fault) {
	e.mu.Lock()
	if e.flt != nil || e.closed || e.killed {
		e.mu.Unlock()
		return
	}
	e.flt = &f
	e.mu.Unlock()

	// The links learn first, so that no goodbye (this rank's Close, once its collectives
	// have failed) can overtake the abort frame.
	abort := encodeAbort(f)
	for _, l := range e.links {
		if l != nil {
			l.stop(stopAbort, abort)
		}
	}
	close(e.failed)
	e.log.Warn("dist: communicator failed", "rank", e.rank, "culprit", f.Rank, "reporter", f.Reporter, "cause", f.Cause.Error())
}

func (e *Engine) Fault() *Fault {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.flt
}

// encodeAbort builds the frame that tells peers about a fault.
func encodeAbort(f Fault) []byte {
	msg := f.Cause.Error()
	if len(msg) > maxAbortText {
		msg = msg[:maxAbortText]
	}
	h := header{kind: frameAbort, length: uint32(len(msg)), arg: uint64(f.Rank),
		arg2: uint32(CodeOf(f.Cause)), arg3: uint32(f.Reporter)}
	b := make([]byte, HeaderSize+len(msg))
	h.put(b)
	copy(b[HeaderSize:], msg)
	return b
}

// Close implements dist.Communicator.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		<-e.done
		return nil
	}
	e.closed = true
	close(e.closing)
	flt := e.flt
	e.mu.Unlock()

	// A failed rank leaves with the abort frame, never with a goodbye: its peers must
	// learn the culprit, not that this rank closed.
	mode, last := stopGoodbye, []byte(nil)
	if flt != nil {
		mode, last = stopAbort, encodeAbort(*flt)
	}
	for _, l := range e.links {
		if l != nil {
			l.stop(mode, last)
		}
	}
	linger := time.NewTimer(closeLinger)
	for _, l := range e.links {
		if l == nil {
			continue
		}
		select {
		case <-l.done:
		case <-linger.C:
			e.forceClose()
			linger.Reset(0)
		}
	}
	linger.Stop()
	for _, l := range e.links {
		if l != nil {
			<-l.done
		}
	}
	e.colls.Wait()
	e.bg.Wait()

	e.mu.Lock()
	for k, b := range e.boxes {
		for _, f := range b.frames {
			e.pool.put(f.buf)
		}
		delete(e.boxes, k)
	}
	e.mu.Unlock()
	close(e.done)
	return nil
}

// forceClose closes every connection at once: pending reads and writes fail.
func (e *Engine) forceClose() {
	for _, l := range e.links {
		if l != nil {
			l.conn.Close()
		}
	}
}

// kill simulates a crash: connections drop without goodbye. Tests use it; Close still
// has to be called to release the rest.
func (e *Engine) Kill() {
	e.mu.Lock()
	e.killed = true
	e.mu.Unlock()
	e.forceClose()
}

// Reset fails the rank, naming itself, and drops its connections at once, as when its
// network fails: its collectives fail, and its peers learn of it from the abort frames
// or the lost connections.
func (e *Engine) Reset() {
	e.Fail(Fault{Rank: e.rank, Reporter: e.rank, Cause: fmt.Errorf("%w: %w", dist.ErrConnLost, dist.ErrReset)})
	e.forceClose()
}

// dist.Stats implements dist.Communicator.
func (e *Engine) Stats() dist.Stats { return e.stats.Snapshot().Sub(e.statsBase) }

// hideSetup makes the collectives run so far invisible to the caller: in numbers and in
// statistics. Only call it before the caller gets the communicator.
func (e *Engine) HideSetup() {
	e.mu.Lock()
	e.seqBase = e.seq
	e.mu.Unlock()
	e.statsBase = e.stats.Snapshot()
	e.statsBase.Busy = 0
}

func (e *Engine) String() string {
	return fmt.Sprintf("dist.Communicator(rank %d of %d)", e.rank, e.size)
}

var _ dist.Communicator = (*Engine)(nil)

// isTimeout reports a deadline error of a net.Conn.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

const (
	// closeLinger bounds how long Close waits for peers to acknowledge its goodbye.
	closeLinger = 2 * time.Second
	// abortGrace bounds how long a failing rank tries to tell a peer why.
	abortGrace = 500 * time.Millisecond
)

// Options are the engine's settings, resolved.
func (e *Engine) Options() dist.Options { return e.o }

// Logger is where the engine reports failures.
func (e *Engine) Logger() *slog.Logger { return e.log }

// Failed is closed at the engine's first fault.
func (e *Engine) Failed() <-chan struct{} { return e.failed }

// Counters are the engine's traffic and time counters, which a transport built on top
// of it (shared memory) adds its own collectives to.
func (e *Engine) Counters() *Counters { return &e.stats }
