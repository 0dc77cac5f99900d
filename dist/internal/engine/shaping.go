package engine

import "time"

// pacer makes a link behave like a cable of a given rate: a piece of n bytes leaves only
// when the cable would have finished carrying it, counted on a virtual clock so that
// oversleeping one piece is made up on the next ones instead of lowering the rate. It
// serves one writer goroutine.
//
// Latency is the other half of the emulation and lives on the receiving side (see
// link.delayLoop): every frame is delivered a fixed time after it arrived, so frames in
// flight overlap and the delay is paid once per frame, not per byte.
type pacer struct {
	bps     float64   // bits per second
	quantum int       // bytes per piece: about 1 ms of transmission
	free    time.Time // when the cable has carried everything written so far
	idle    bool      // the writer ran out of frames since the last wait
	timer   *time.Timer
}

const (
	// paceBurst is how far an idle cable's clock may lag behind real time: the credit
	// with which a new transfer starts, small enough not to show in a rate measurement.
	paceBurst = time.Millisecond
	// paceCatchUp is how far the clock may lag while the writer streams without a
	// break: time lost to oversleeping or to a slow write is made up, up to this much.
	paceCatchUp = 20 * time.Millisecond
	// paceMinSleep: shorter waits are skipped (the clock keeps the debt) because a
	// sleep that short costs more than it waits.
	paceMinSleep = 50 * time.Microsecond
)

func newPacer(bps float64) *pacer {
	q := int(bps / 8 * 0.001)
	q = min(max(q, 1<<10), 64<<10)
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &pacer{bps: bps, quantum: q, timer: t}
}

// wait blocks until n more bytes may leave; it returns false at once if abort is
// closed.
func (p *pacer) wait(n int, abort <-chan struct{}) bool {
	now := time.Now()
	credit := paceCatchUp
	if p.idle {
		credit, p.idle = paceBurst, false
	}
	if earliest := now.Add(-credit); p.free.Before(earliest) {
		p.free = earliest
	}
	p.free = p.free.Add(time.Duration(float64(n) * 8 / p.bps * float64(time.Second)))
	d := p.free.Sub(now)
	if d < paceMinSleep {
		select {
		case <-abort:
			return false
		default:
			return true
		}
	}
	p.timer.Reset(d)
	select {
	case <-p.timer.C:
		return true
	case <-abort:
		p.timer.Stop()
		return false
	}
}
