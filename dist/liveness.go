package dist

import (
	"fmt"
	"time"
)

// oldestWait returns the peer this rank has waited on longest, -1 if none: heartbeats
// carry it so that a rank blocked behind another does not get blamed itself.
func (e *engine) oldestWait() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	peer, since := -1, time.Time{}
	for p, ws := range e.waits {
		for w := range ws {
			if peer < 0 || w.since.Before(since) {
				peer, since = p, w.since
			}
		}
	}
	return peer
}

// monitor fails the communicator when a peer that a collective waits on stays silent
// for longer than the timeout.
func (e *engine) monitor() {
	defer e.bg.Done()
	period := max(e.o.timeout/8, 5*time.Millisecond)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			if f := e.checkSilence(now); f != nil {
				e.fail(*f)
				return
			}
		case <-e.failed:
			return
		case <-e.closing:
			return
		}
	}
}

// checkSilence applies the timeout rule. Silence counts only while a collective waits on
// the peer, from the later of the wait's start and the peer's last data frame. A silent
// peer that says (in its heartbeats) it is itself waiting on a third rank gets up to three
// timeouts, so that the rank that detects the real culprit reports it first.
func (e *engine) checkSilence(now time.Time) *fault {
	T := e.o.timeout
	e.mu.Lock()
	defer e.mu.Unlock()
	for p, ws := range e.waits {
		if len(ws) == 0 {
			continue
		}
		var oldest time.Time
		for w := range ws {
			if oldest.IsZero() || w.since.Before(oldest) {
				oldest = w.since
			}
		}
		ref := time.Unix(0, e.lastData[p].Load())
		if oldest.After(ref) {
			ref = oldest
		}
		silent := now.Sub(ref)
		if silent <= T {
			continue
		}
		if quiet := now.Sub(time.Unix(0, e.lastAny[p].Load())); quiet > T {
			return &fault{rank: p, reporter: e.rank, cause: fmt.Errorf(
				"%w: no frame, not even a heartbeat, for %v (timeout %v)", ErrTimeout, quiet.Round(time.Millisecond), T)}
		}
		if w := int(e.peerWaiting[p].Load()); w >= 0 && w != e.rank && silent <= 3*T {
			continue
		}
		return &fault{rank: p, reporter: e.rank, cause: fmt.Errorf(
			"%w: sent nothing for %v while awaited (timeout %v)", ErrTimeout, silent.Round(time.Millisecond), T)}
	}
	return nil
}
