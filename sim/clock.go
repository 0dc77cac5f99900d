package sim

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/ssfusion/ssfusion/pipeline"
)

// VirtualClock is a pipeline.Clock on which time passes only when code says so: a goroutine's
// time moves on by Advance (compute replayed from a profile), by Work (a modelled
// selection) and by Join (waiting for an event stamped later, such as the end of a
// simulated collective).
//
// Every goroutine has a time of its own, which starts at the clock's epoch. Goroutines are
// concurrent lanes of work: two that select at once both take the modelled time, in
// parallel, as the worker goroutines of an offloading pipeline do. Time crosses from one
// goroutine to another only through Join, which is why code that hands work over carries
// a stamp (Now) along with it.
type VirtualClock struct {
	epoch time.Time
	work  func(kind string, n int) time.Duration

	mu    sync.Mutex
	lanes map[uint64]time.Duration
}

// virtualEpoch is where virtual time starts; far from the wall clock, so that mixing the two
// up shows.
var virtualEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// NewVirtualClock returns a clock whose Work takes work(kind, n).
func NewVirtualClock(work func(kind string, n int) time.Duration) *VirtualClock {
	return &VirtualClock{epoch: virtualEpoch, work: work, lanes: make(map[uint64]time.Duration)}
}

var _ pipeline.Clock = (*VirtualClock)(nil)

// Now implements pipeline.Clock.
func (c *VirtualClock) Now() time.Time {
	g := goid()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch.Add(c.lanes[g])
}

// Since implements pipeline.Clock.
func (c *VirtualClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Work implements pipeline.Clock: the calling goroutine spends the modelled time.
func (c *VirtualClock) Work(_ time.Time, kind string, n int) time.Duration {
	d := c.work(kind, n)
	c.Advance(d)
	return d
}

// Join implements pipeline.Clock.
func (c *VirtualClock) Join(t time.Time) {
	at := t.Sub(c.epoch)
	g := goid()
	c.mu.Lock()
	defer c.mu.Unlock()
	if at > c.lanes[g] {
		c.lanes[g] = at
	}
}

// Advance moves the calling goroutine's time on by d.
func (c *VirtualClock) Advance(d time.Duration) {
	g := goid()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lanes[g] += d
}

// Elapsed is the calling goroutine's time since the epoch.
func (c *VirtualClock) Elapsed() time.Duration { return c.Now().Sub(c.epoch) }

// goid is the calling goroutine's id. The runtime keeps it private; its stack trace header,
// "goroutine N [...]", is the one public place it shows. Reading it costs about a
// microsecond, which a simulated step, a few hundred calls, can afford.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		panic("sim: cannot read the goroutine id from " + strconv.Quote(string(buf[:])))
	}
	return id
}
