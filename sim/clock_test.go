package sim

import (
	"sync"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/fusion"
	"github.com/ssfusion/ssfusion/pipeline"
)

// TestVirtualClockLanes: goroutines keep times of their own, joined only on purpose.
func TestVirtualClockLanes(t *testing.T) {
	clock := NewVirtualClock(func(kind string, n int) time.Duration { return time.Duration(n) * time.Microsecond })
	clock.Advance(5 * time.Millisecond)
	stamp := clock.Now()
	var other, joined time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		other = clock.Elapsed() // a new goroutine starts at the epoch
		clock.Join(stamp)
		if d := clock.Work(clock.Now(), "topk", 1000); d != time.Millisecond {
			t.Errorf("work took %v, want 1ms", d)
		}
		joined = clock.Elapsed()
	}()
	<-done
	if other != 0 || joined != 6*time.Millisecond {
		t.Errorf("other goroutine: started at %v, after join and work %v; want 0 and 6ms", other, joined)
	}
	if got := clock.Elapsed(); got != 5*time.Millisecond {
		t.Errorf("this goroutine moved to %v by another's work", got)
	}
	clock.Join(stamp.Add(-time.Second)) // an earlier stamp moves nothing
	if got := clock.Elapsed(); got != 5*time.Millisecond {
		t.Errorf("joining an earlier time moved the clock to %v", got)
	}
	if pipeline.ClockOf(NewSimRank(2, fixedCost{}, clock)) != pipeline.Clock(clock) {
		t.Errorf("a simulated communicator does not expose its clock")
	}
	inproc := inproc.New(1)[0]
	defer inproc.Close()
	if _, ok := pipeline.ClockOf(inproc).(pipeline.WallClock); !ok {
		t.Errorf("the in-process backend does not run on the wall clock")
	}
}

// TestControllerCarriesVirtualTime: on a virtual clock a collective is issued no earlier
// than the latest stamp of its parts, and whoever waits for the step joins the time the
// controller's goroutine reached.
func TestControllerCarriesVirtualTime(t *testing.T) {
	clock := NewVirtualClock(nil)
	var issuedAt []time.Duration
	c := fusion.NewController(clock, 2, true, func(i int) fusion.Completion {
		issuedAt = append(issuedAt, clock.Elapsed())
		end := clock.Now().Add(time.Millisecond) // the collective takes 1 ms
		var once sync.Once
		return func() error {
			// Only the first wait joins, on the controller's goroutine: a completion that
			// caches its outcome (ExDyna's) leaves the waiter to join the controller.
			once.Do(func() { clock.Join(end) })
			return nil
		}
	})
	clock.Advance(2 * time.Millisecond) // the step begins at 2 ms
	c.Begin()
	done := make(chan struct{})
	go func() { // a part prepared elsewhere, late
		defer close(done)
		clock.Advance(7 * time.Millisecond)
		c.Stamp(0, clock.Now())
		c.Ready(0)
	}()
	<-done
	c.Stamp(1, clock.Now()) // ready at 2 ms, but issued after collective 0
	c.Ready(1)
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(issuedAt) != 2 || issuedAt[0] != 7*time.Millisecond || issuedAt[1] != 8*time.Millisecond {
		t.Errorf("issued at %v, want [7ms 8ms]", issuedAt)
	}
	if got := clock.Elapsed(); got != 9*time.Millisecond {
		t.Errorf("the waiter is at %v after the step, want 9ms", got)
	}
}
