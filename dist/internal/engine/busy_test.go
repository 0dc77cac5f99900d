package engine

import (
	"sync"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/dist"
)

func TestBusyClockIsTheUnion(t *testing.T) {
	var b BusyClock
	t0 := time.Unix(0, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// [0, 10) and [5, 20) overlap: 20 ms busy, not 25; then [30, 35): 25 in all.
	b.Start(at(0))
	b.Start(at(5))
	b.End(at(10))
	b.End(at(20))
	b.Start(at(30))
	if got := b.Busy(at(33)); got != 23*time.Millisecond {
		t.Errorf("busy while in flight: %v, want 23ms", got)
	}
	b.End(at(35))
	if got := b.Busy(at(100)); got != 25*time.Millisecond {
		t.Errorf("busy %v, want 25ms", got)
	}
}

// TestBusyNeverExceedsTheWallTime: collectives in flight together count once in Busy,
// while CommTime sums them.
func TestBusyNeverExceedsTheWallTime(t *testing.T) {
	o, err := dist.NewOptions(dist.Options{}, dist.WithLatency(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	comms := InProc(2, o)
	defer comms[0].Close()
	defer comms[1].Close()
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Go(func() {
			var hs []dist.Handle
			for range 4 {
				hs = append(hs, c.AllReduceAsync(make([]float32, 16), dist.Sum))
			}
			for _, h := range hs {
				if err := h.Wait(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	s := comms[0].Stats()
	if s.Busy <= 0 || s.Busy > wall || s.CommTime() <= s.Busy {
		t.Errorf("busy %v, summed %v, wall %v: want 0 < busy <= wall < summed", s.Busy, s.CommTime(), wall)
	}
}
