package fusion

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/ssfusion/ssfusion/pipeline"
)

// recorder issues fake collectives and records the order and overlap of their issue.
type recorder struct {
	mu       sync.Mutex
	order    []int
	inFlight int
	maxIn    int
	release  []chan struct{}
}

func (r *recorder) issue(i int) Completion {
	r.mu.Lock()
	r.order = append(r.order, i)
	r.inFlight++
	r.maxIn = max(r.maxIn, r.inFlight)
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		<-r.release[i]
		r.mu.Lock()
		r.inFlight--
		r.mu.Unlock()
		close(done)
	}()
	return func() error { <-done; return nil }
}

func TestControllerIssuesInOrder(t *testing.T) {
	for _, serial := range []bool{false, true} {
		const n = 5
		rec := &recorder{release: make([]chan struct{}, n)}
		for i := range rec.release {
			rec.release[i] = make(chan struct{})
			close(rec.release[i]) // collectives complete at once
		}
		c := NewController(pipeline.WallClock{}, n, serial, rec.issue)
		for range 2 { // the controller is reused step after step
			rec.order = nil
			c.Begin()
			// Ready out of order, from several goroutines.
			var wg sync.WaitGroup
			for _, i := range []int{3, 1, 4, 0, 2} {
				wg.Add(1)
				go func() { defer wg.Done(); c.Ready(i) }()
			}
			wg.Wait()
			if err := c.Wait(); err != nil {
				t.Fatal(err)
			}
			if want := []int{0, 1, 2, 3, 4}; !slices.Equal(rec.order, want) {
				t.Fatalf("serial %v: issued %v, want %v", serial, rec.order, want)
			}
		}
	}
}

// TestControllerOverlap: a non-serial controller keeps several collectives in flight, a
// serial one never more than one.
func TestControllerOverlap(t *testing.T) {
	for _, serial := range []bool{false, true} {
		const n = 3
		rec := &recorder{release: make([]chan struct{}, n)}
		for i := range rec.release {
			rec.release[i] = make(chan struct{})
		}
		c := NewController(pipeline.WallClock{}, n, serial, rec.issue)
		c.Begin()
		for i := range n {
			c.Ready(i)
		}
		if !serial {
			// All three start although none has completed.
			for {
				rec.mu.Lock()
				k := len(rec.order)
				rec.mu.Unlock()
				if k == n {
					break
				}
			}
		}
		for i := range n {
			close(rec.release[i])
		}
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{false: n, true: 1}[serial]; rec.maxIn != want {
			t.Errorf("serial %v: %d collectives in flight at once, want %d", serial, rec.maxIn, want)
		}
	}
}

func TestControllerFail(t *testing.T) {
	const n = 4
	rec := &recorder{release: make([]chan struct{}, n)}
	for i := range rec.release {
		rec.release[i] = make(chan struct{})
		close(rec.release[i])
	}
	c := NewController(pipeline.WallClock{}, n, false, rec.issue)
	c.Begin()
	c.Ready(0)
	boom := errors.New("selection failed")
	c.Fail(boom)
	c.Fail(errors.New("later failure"))
	c.Ready(1) // late readiness after a failure must not block or issue
	if err := c.Wait(); !errors.Is(err, boom) {
		t.Fatalf("Wait returned %v, want the first failure", err)
	}
	if len(rec.order) > 1 {
		t.Fatalf("issued %v after the failure", rec.order)
	}
	// A failed collective's error reaches Wait too.
	failing := NewController(pipeline.WallClock{}, 1, true, func(int) Completion { return func() error { return boom } })
	failing.Begin()
	failing.Ready(0)
	if err := failing.Wait(); !errors.Is(err, boom) {
		t.Fatalf("Wait returned %v, want the collective's error", err)
	}
}
