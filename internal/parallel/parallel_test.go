package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDynamicCoversEveryPieceOnce checks Dynamic's ranges and worker indices.
func TestDynamicCoversEveryPieceOnce(t *testing.T) {
	for _, c := range []struct{ n, pieces int }{{0, 4}, {1, 8}, {5, 8}, {32, 8}, {33, 7}, {1000, 3}} {
		seen := make([]atomic.Int32, c.n)
		pieces := make([]atomic.Int32, c.pieces)
		w := DynamicWorkers(c.n, c.pieces)
		Dynamic(c.n, c.pieces, func(worker, piece, lo, hi int) {
			if worker < 0 || worker >= w {
				t.Errorf("n=%d: worker %d of %d", c.n, worker, w)
			}
			pieces[piece].Add(1)
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		})
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Errorf("n=%d pieces=%d: element %d seen %d times", c.n, c.pieces, i, seen[i].Load())
			}
		}
		for p := range min(c.n, c.pieces) {
			if pieces[p].Load() != 1 {
				t.Errorf("n=%d pieces=%d: piece %d run %d times", c.n, c.pieces, p, pieces[p].Load())
			}
		}
	}
}

// TestConcurrentCalls: calls from many goroutines at once, which take the pool's helpers
// and start goroutines when none is free, each run every piece of their own exactly once,
// and the pool stays within its bound.
func TestConcurrentCalls(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 200 {
				n := 1 + (g*7+i)%64
				seen := make([]atomic.Int32, n)
				Dynamic(n, 8, func(_, _, lo, hi int) {
					for k := lo; k < hi; k++ {
						seen[k].Add(1)
					}
				})
				For(n, 1, func(_, lo, hi int) {
					for k := lo; k < hi; k++ {
						seen[k].Add(1)
					}
				})
				for k := range seen {
					if v := seen[k].Load(); v != 2 {
						t.Errorf("goroutine %d call %d: element %d of %d covered %d times, want 2", g, i, k, n, v)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	helpers.mu.Lock()
	n := len(helpers.list)
	helpers.mu.Unlock()
	if limit := maxHelpers * runtime.GOMAXPROCS(0); n > limit {
		t.Errorf("%d helpers, more than the bound %d", n, limit)
	}
}

// TestPanicReachesTheCaller: a panic in a piece a helper runs is raised on the caller's
// goroutine, and the helper goes on serving later calls.
func TestPanicReachesTheCaller(t *testing.T) {
	for range 3 {
		func() {
			defer func() {
				if r := recover(); r != "piece 7" {
					t.Errorf("recovered %v, want the panic of piece 7", r)
				}
			}()
			Dynamic(8, 8, func(_, p, _, _ int) {
				if p == 7 {
					panic("piece 7")
				}
			})
		}()
	}
	var ran atomic.Int32
	Dynamic(8, 8, func(_, _, _, _ int) { ran.Add(1) })
	if ran.Load() != 8 {
		t.Errorf("after the panics %d pieces ran, want 8", ran.Load())
	}
}

// BenchmarkDynamic times a call of 200 µs of work in 8 pieces of 25 µs, which two cores can
// finish in 100 µs; helper-start-µs is when the first piece not on the caller's goroutine
// began, from the call's start.
func BenchmarkDynamic(b *testing.B) {
	var start time.Duration
	for b.Loop() {
		t0 := time.Now()
		var first atomic.Int64
		first.Store(-1)
		Dynamic(8, 8, func(w, _, _, _ int) {
			s := time.Since(t0)
			if w != 0 {
				first.CompareAndSwap(-1, int64(s))
			}
			for time.Since(t0) < s+25*time.Microsecond {
			}
		})
		if f := first.Load(); f >= 0 {
			start += time.Duration(f)
		}
	}
	b.ReportMetric(float64(start.Microseconds())/float64(b.N), "helper-start-µs")
}

// TestSetLimit: the cap lowers Workers below GOMAXPROCS, never raises it, and lifts.
func TestSetLimit(t *testing.T) {
	procs := runtime.GOMAXPROCS(4)
	defer runtime.GOMAXPROCS(procs)
	defer SetLimit(SetLimit(0))
	for _, tc := range []struct{ limit, want int }{{0, 4}, {1, 1}, {3, 3}, {8, 4}, {-2, 4}} {
		SetLimit(tc.limit)
		if got := Workers(); got != tc.want {
			t.Errorf("limit %d under GOMAXPROCS 4: %d workers, want %d", tc.limit, got, tc.want)
		}
	}
	SetLimit(1)
	if got := chunks(1000, 1); got != 1 {
		t.Errorf("limit 1: For splits into %d pieces, want 1", got)
	}
}
