package engine

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ssfusion/ssfusion/dist"
)

// rxEvent is a received frame, or the end of the stream, on its way through the latency
// emulation: the end must not overtake the frames before it (an abort among them).
type rxEvent struct {
	h      header
	buf    *[]byte
	direct bool
	err    error
	at     time.Time
}

func (l *link) readLoop() {
	defer l.wg.Done()
	br := bufio.NewReaderSize(l.conn, 64<<10)
	latency := l.e.o.Latency
	var delay chan rxEvent
	if latency > 0 {
		delay = make(chan rxEvent, 4096)
		l.wg.Add(1)
		go l.delayLoop(delay)
		defer close(delay)
	}
	var hb [HeaderSize]byte
	for {
		h, buf, direct, err := l.readFrame(br, hb[:])
		if err != nil {
			if delay != nil {
				delay <- rxEvent{err: err}
			} else {
				l.readFailed(err)
			}
			return
		}
		if h.kind == frameHeartbeat {
			l.e.peerWaiting[l.peer].Store(int32(h.arg) - 1)
			continue
		}
		if delay != nil {
			delay <- rxEvent{h: h, buf: buf, direct: direct, at: time.Now().Add(latency)}
		} else {
			l.handle(h, buf, direct)
		}
		if h.kind != frameData {
			return // nothing follows a goodbye or an abort
		}
	}
}

// delayLoop delivers frames latency after they arrived: once per frame, and pipelined,
// since frames arrive in order and each waits only for its own deadline.
func (l *link) delayLoop(ch <-chan rxEvent) {
	defer l.wg.Done()
	t := time.NewTimer(0)
	<-t.C
	for ev := range ch {
		if ev.err != nil {
			l.readFailed(ev.err)
			continue
		}
		if d := time.Until(ev.at); d > 0 {
			t.Reset(d)
			<-t.C
		}
		l.handle(ev.h, ev.buf, ev.direct)
	}
}

func (l *link) handle(h header, buf *[]byte, direct bool) {
	e := l.e
	switch h.kind {
	case frameData:
		e.lastData[l.peer].Store(time.Now().UnixNano())
		e.deliver(l.peer, h, buf, direct)
	case frameGoodbye:
		e.peerLeft(l.peer)
	case frameAbort:
		culprit, reporter := int(h.arg), int(h.arg3)
		if h.arg >= uint64(e.size) || reporter >= e.size {
			culprit, reporter = l.peer, l.peer
		}
		var msg string
		if buf != nil {
			msg = string(*buf)
		}
		e.Fail(Fault{Rank: culprit, Reporter: reporter, Cause: &RemoteCause{Code: CauseCode(h.arg2), Msg: msg}})
	}
}

// readFrame reads and checks one frame. Lengths are checked before anything is
// allocated; a data payload goes into the sink the collective posted for it (direct) or
// into a pooled buffer.
func (l *link) readFrame(br *bufio.Reader, hb []byte) (h header, bp *[]byte, direct bool, err error) {
	n, err := io.ReadFull(br, hb)
	if err != nil {
		if n == 0 {
			return header{}, nil, false, err
		}
		return header{}, nil, false, truncated(err, n, HeaderSize, "header")
	}
	e := l.e
	e.lastAny[l.peer].Store(time.Now().UnixNano())
	if h, err = parseHeader(hb); err != nil {
		return h, nil, false, err
	}
	if h.kind == frameHeartbeat && h.arg > uint64(e.size) {
		return h, nil, false, ProtocolErr("heartbeat names rank %d of %d", int64(h.arg)-1, e.size)
	}
	var dst []byte
	if h.kind == frameData {
		if dst, err = e.arrive(l.peer, h); err != nil {
			return h, nil, false, err
		}
	}
	size := int64(HeaderSize) + int64(h.length)
	if h.kind == frameData {
		e.stats.Recv.Add(size)
		e.stats.FramesRecv.Add(1)
		e.stats.Ops[h.coll&0xf].Recv.Add(size)
	} else {
		e.stats.CtlRecv.Add(size)
	}
	if h.length == 0 {
		return h, nil, false, nil
	}
	b := dst
	switch {
	case dst != nil:
		direct = true
		e.stats.Direct.Add(1)
	case h.kind == frameData:
		bp = e.pool.get(int(h.length))
		b = *bp
	default:
		b = make([]byte, h.length)
		bp = &b
	}
	for off := 0; off < len(b); {
		// Every read that returns shows the peer alive, also in the middle of a long
		// frame on a slow link.
		m, err := br.Read(b[off:])
		off += m
		if err == io.EOF && off < len(b) {
			err = io.ErrUnexpectedEOF
		}
		if err != nil && off < len(b) {
			e.pool.put(bp)
			if direct {
				e.releaseSink(boxKey{l.peer, h.seq})
			}
			return h, nil, false, truncated(err, off, len(b), "payload")
		}
		e.lastAny[l.peer].Store(time.Now().UnixNano())
	}
	return h, bp, direct, nil
}

func truncated(err error, got, want int, part string) error {
	return fmt.Errorf("%w in the middle of a frame (%d of %d %s bytes): %v", dist.ErrConnLost, got, want, part, err)
}

// readFailed turns the end of the stream into the peer's fault, unless this rank was
// stopping the link anyway.
func (l *link) readFailed(err error) {
	e := l.e
	select {
	case <-e.closing:
		return
	case <-e.failed:
		return
	default:
	}
	l.mu.Lock()
	stopping := l.mode != stopNone
	l.mu.Unlock()
	if stopping {
		return
	}
	var cause error
	switch {
	case errors.Is(err, dist.ErrProtocol), errors.Is(err, dist.ErrConnLost), errors.Is(err, dist.ErrMismatch):
		cause = err
	case errors.Is(err, io.EOF):
		cause = dist.ErrConnLost
	default:
		cause = fmt.Errorf("%w: read: %v", dist.ErrConnLost, err)
	}
	e.Fail(Fault{Rank: l.peer, Reporter: e.rank, Cause: cause})
}
