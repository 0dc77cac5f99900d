package pipeline

import (
	"time"

	"github.com/ssfusion/ssfusion/dist"
)

// Clock is the time a pipeline measures itself by. Real runs read the wall clock; a
// communicator with a clock of its own (a simulated one, whose work and collectives take
// the time a model predicts) exposes it through Clocked, and the same code runs on it.
//
// Code that hands work from one goroutine to another (a queue of jobs, a collective's
// readiness) carries the time along with Now and Join, so that virtual time follows the
// causes of each event and not the order in which goroutines happen to run.
type Clock interface {
	// Now is the calling goroutine's current time.
	Now() time.Time
	// Since is the time elapsed on the calling goroutine since t.
	Since(t time.Time) time.Duration
	// Work ends a piece of computation of the given kind over n elements (a selection:
	// kind is the selector's name) that began at start, and returns how long it took.
	// On a virtual clock that is the model's prediction, and the caller's time moves on by
	// as much.
	Work(start time.Time, kind string, n int) time.Duration
	// Join moves the calling goroutine's time on to t if t is later: what the goroutine
	// does next happens after the event that t stamps.
	Join(t time.Time)
}

// Clocked is implemented by communicators that run on a clock of their own.
type Clocked interface {
	Clock() Clock
}

// ClockOf returns comm's clock, or the wall clock.
func ClockOf(comm dist.Communicator) Clock {
	if c, ok := comm.(Clocked); ok {
		return c.Clock()
	}
	return WallClock{}
}

// WallClock is real time.
type WallClock struct{}

// Now implements Clock.
func (WallClock) Now() time.Time { return time.Now() }

// Since implements Clock.
func (WallClock) Since(t time.Time) time.Duration { return time.Since(t) }

// Work implements Clock: the time the work really took.
func (WallClock) Work(start time.Time, _ string, _ int) time.Duration { return time.Since(start) }

// Join implements Clock: real time needs no carrying.
func (WallClock) Join(time.Time) {}
