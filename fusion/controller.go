package fusion

import (
	"fmt"
	"sync"
	"time"

	"github.com/ssfusion/ssfusion/pipeline"
)

// Controller issues the collectives of a step in a fixed order, each as soon as it is ready
// and every collective before it has been issued. Work that makes collectives ready may run
// on any goroutine and finish in any order (offloaded selection does), yet every rank issues
// the same collectives in the same order, which the transport needs to match them up.
//
// A serial Controller also waits for each collective to complete before issuing the next,
// as a single communication stream does; otherwise collectives overlap in flight.
type Controller struct {
	issue  func(i int) Completion
	serial bool
	clock  pipeline.Clock

	ready chan int
	abort chan struct{}
	done  chan struct{}
	once  sync.Once // closes abort

	isReady []bool
	waits   []Completion
	issued  int
	begun   time.Time   // when the step began, on the clock
	ended   time.Time   // when the controller's goroutine finished, on the clock
	readyAt []time.Time // by collective: the latest stamp of its parts, see Stamp
	mu      sync.Mutex
	err     error // first failure of the step
}

// A Completion waits for a started collective and reports its outcome. Calling it more
// than once returns the same outcome.
type Completion func() error

// NewController returns a controller of n collectives per step; issue(i) starts collective
// i of the step. Collectives are issued on clock's time: each no earlier than the stamps
// of its parts (see Stamp) and the start of the step.
func NewController(clock pipeline.Clock, n int, serial bool, issue func(i int) Completion) *Controller {
	return &Controller{issue: issue, serial: serial, clock: clock, isReady: make([]bool, n),
		waits: make([]Completion, n), readyAt: make([]time.Time, n)}
}

// Stamp records that a part of collective i was prepared at t, a time of the controller's
// clock. Safe for concurrent use; call it before the Ready it leads to.
func (c *Controller) Stamp(i int, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.readyAt[i]) {
		c.readyAt[i] = t
	}
}

// Begin starts a step. Call it before the step's first Ready.
func (c *Controller) Begin() {
	clear(c.isReady)
	clear(c.waits)
	clear(c.readyAt)
	c.begun = c.clock.Now()
	c.issued, c.err = 0, nil
	c.ready = make(chan int, len(c.isReady))
	c.abort = make(chan struct{})
	c.done = make(chan struct{})
	c.once = sync.Once{}
	go c.run(c.ready, c.abort, c.done)
}

func (c *Controller) run(ready <-chan int, abort <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	// A serial controller waits for collectives on its own goroutine; whoever waits for the
	// controller must join the time that took.
	defer func() { c.ended = c.clock.Now() }()
	c.clock.Join(c.begun)
	for i := range c.isReady {
		for !c.isReady[i] {
			select {
			case j := <-ready:
				c.isReady[j] = true
			case <-abort:
				return
			}
		}
		select {
		case <-abort: // the step failed while this collective was being readied
			return
		default:
		}
		c.mu.Lock()
		at := c.readyAt[i]
		c.mu.Unlock()
		c.clock.Join(at)
		c.waits[i] = c.issue(i)
		c.issued = i + 1
		if c.serial {
			if err := c.waits[i](); err != nil {
				c.Fail(fmt.Errorf("collective %d of the step: %w", i, err))
				return
			}
		}
	}
}

// Ready marks collective i as ready to be issued. Each collective must be marked once per
// step.
func (c *Controller) Ready(i int) { c.ready <- i }

// Fail records err as the step's failure and stops issuing: the step's remaining
// collectives are never started.
func (c *Controller) Fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	c.once.Do(func() { close(c.abort) })
}

// Wait waits until every collective of the step has been issued and has completed, or
// until a failure stopped the step, and returns the first error. Collectives already
// issued are always waited for, so their buffers are free again when Wait returns.
func (c *Controller) Wait() error {
	<-c.done
	c.clock.Join(c.ended)
	var first error
	for i, w := range c.waits[:c.issued] {
		if err := w(); err != nil && first == nil {
			first = fmt.Errorf("collective %d of the step: %w", i, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	return first
}
