package engine

import (
	"fmt"
	"time"

	"github.com/ssfusion/ssfusion/dist"
)

// oldestWait returns the peer this rank has waited on longest, -1 if none: heartbeats
// carry it so that a rank blocked behind another does not get blamed itself.
func (e *Engine) oldestWait() int {
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
func (e *Engine) monitor() {
	defer e.bg.Done()
	period := max(e.o.Timeout/8, 5*time.Millisecond)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			if f := e.checkSilence(now); f != nil {
				e.Fail(*f)
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
func (e *Engine) checkSilence(now time.Time) *Fault {
	T := e.o.Timeout
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
			return &Fault{Rank: p, Reporter: e.rank, Cause: fmt.Errorf(
				"%w: no frame, not even a heartbeat, for %v (timeout %v)", dist.ErrTimeout, quiet.Round(time.Millisecond), T)}
		}
		if w := int(e.peerWaiting[p].Load()); w >= 0 && w != e.rank && silent <= 3*T {
			continue
		}
		return &Fault{Rank: p, Reporter: e.rank, Cause: fmt.Errorf(
			"%w: sent nothing for %v while awaited (timeout %v)", dist.ErrTimeout, silent.Round(time.Millisecond), T)}
	}
	return nil
}
