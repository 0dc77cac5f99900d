package engine

import (
	"sync"
	"time"
)

// BusyClock measures the wall time during which at least one collective of a rank is in
// flight: the union of the collectives' intervals from issue to completion, which, unlike
// their summed durations, never exceeds the time that passed.
type BusyClock struct {
	mu       sync.Mutex
	inFlight int
	since    time.Time // when inFlight last rose from 0
	total    time.Duration
}

// start records a collective issued at t.
func (b *BusyClock) Start(t time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inFlight == 0 {
		b.since = t
	}
	b.inFlight++
}

// end records a collective completed at t.
func (b *BusyClock) End(t time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inFlight--
	if b.inFlight == 0 {
		b.total += t.Sub(b.since)
	}
}

// busy is the time with a collective in flight until now, counting the present stretch.
func (b *BusyClock) Busy(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.total
	if b.inFlight > 0 {
		d += now.Sub(b.since)
	}
	return d
}
