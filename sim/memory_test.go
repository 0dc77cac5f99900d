package sim

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBudgetBoundsWhatRuns: jobs take their memory only when it fits beside the running
// ones, and a job larger than the whole budget still runs, alone.
func TestBudgetBoundsWhatRuns(t *testing.T) {
	b := newBudget(100)
	var inUse, peak atomic.Int64
	run := func(n int64) {
		b.take(n, true)
		now := inUse.Add(n)
		for {
			p := peak.Load()
			if now <= p || peak.CompareAndSwap(p, now) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
		inUse.Add(-n)
		b.give(n, true)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { run(40) })
	}
	wg.Wait()
	if p := peak.Load(); p > 100 || p < 40 {
		t.Errorf("peak %d bytes in use, want at most the budget of 100 and at least one job", p)
	}
	peak.Store(0)
	wg.Go(func() { run(250) })
	wg.Go(func() { run(40) })
	wg.Wait()
	if p := peak.Load(); p != 250 {
		t.Errorf("peak %d with a job of 250 on a budget of 100, want it alone: 250", p)
	}
}
