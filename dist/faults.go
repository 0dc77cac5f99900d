package dist

import (
	"errors"
	"fmt"
)

// Fault points are named places in the transports at which a test can watch a rank or
// make it crash, so that failure tests order events by what the transport does rather
// than by the clock.
//
// A job's fault hook (withFaultHook) is an option like any other, so nothing is shared
// between jobs, and it is nil outside tests: at every fault point the transport only
// checks the func field.

// faultPoint names a place in a transport where the fault hook is called.
type faultPoint uint8

const (
	// faultBeforeSend: a link's writer is about to write a data frame; none of it is on
	// the connection yet.
	faultBeforeSend faultPoint = 1 + iota
	// faultPartialFrame: the writer has written a data frame's header and the first half
	// of its payload; the rest follows when the hook returns.
	faultPartialFrame
	// faultAfterSend: the writer has written a data frame whole (on a pipe, the peer's
	// reader has taken it).
	faultAfterSend
	// faultShmStep: a rank on shared memory has written its part of the next step of a
	// collective and is about to announce the step to its peers.
	faultShmStep
)

func (p faultPoint) String() string {
	switch p {
	case faultBeforeSend:
		return "before-send"
	case faultPartialFrame:
		return "partial-frame"
	case faultAfterSend:
		return "after-send"
	case faultShmStep:
		return "shm-step"
	}
	return fmt.Sprintf("faultPoint(%d)", uint8(p))
}

// faultEvent tells the hook where a rank is.
type faultEvent struct {
	point faultPoint
	rank  int // the rank at the point
	peer  int // the link's peer; -1 at a shared memory step
	kind  collKind
	// seq is the collective's number as its caller counts (1 for the first). The
	// allgathervs with which DialTCP agrees on shared memory are numbered from 1 as well,
	// before the caller's, so a hook that targets a collective checks its kind too.
	seq uint64
	// n, from 0, is the frame's index among the data frames this rank queued for the
	// collective, to any peer, or the step's index within a shared memory collective.
	n int
}

// faultHook is called at every fault point of a job, on the transport's goroutines and
// concurrently from several of them, so it must be safe for concurrent use. It may block
// (holding the rank at that point) or record the event. It returns true to make the rank
// crash there: its connections drop without a goodbye or an abort, as if its process had
// died, and it sends nothing more.
type faultHook func(faultEvent) (crash bool)

// withFaultHook installs the fault hook of a job; tests pass it to every rank.
func withFaultHook(h faultHook) Option { return func(o *options) { o.fault = h } }

// errCrashed is what the rank that the fault hook crashed gets from the operation that
// was under way.
var errCrashed = errors.New("dist: crashed at a fault point")
