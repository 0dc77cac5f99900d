package dist

import (
	"errors"
	"fmt"
)

// Fault points are named places in the transports at which a test or a fault-injection
// tool can watch a rank or make it crash, so that failure tests order events by what the
// transport does rather than by the clock.
//
// A job's fault hook (WithFaultHook) is an option like any other, so nothing is shared
// between jobs, and it is nil in normal runs: at every fault point the transport only
// checks the func field.

// FaultPoint names a place in a transport where the fault hook is called.
type FaultPoint uint8

const (
	// FaultBeforeSend: a link's writer is about to write a data frame; none of it is on
	// the connection yet.
	FaultBeforeSend FaultPoint = 1 + iota
	// FaultPartialFrame: the writer has written a data frame's header and the first half
	// of its payload; the rest follows when the hook returns.
	FaultPartialFrame
	// FaultAfterSend: the writer has written a data frame whole (on a pipe, the peer's
	// reader has taken it).
	FaultAfterSend
	// FaultShmStep: a rank on shared memory has written its part of the next step of a
	// collective and is about to announce the step to its peers.
	FaultShmStep
)

// FaultPoints lists every fault point of the transports.
func FaultPoints() []FaultPoint {
	return []FaultPoint{FaultBeforeSend, FaultPartialFrame, FaultAfterSend, FaultShmStep}
}

func (p FaultPoint) String() string {
	switch p {
	case FaultBeforeSend:
		return "before-send"
	case FaultPartialFrame:
		return "partial-frame"
	case FaultAfterSend:
		return "after-send"
	case FaultShmStep:
		return "shm-step"
	}
	return fmt.Sprintf("FaultPoint(%d)", uint8(p))
}

// FaultEvent tells the hook where a rank is.
type FaultEvent struct {
	Point      FaultPoint
	Rank       int    // the rank at the point
	Peer       int    // the link's peer; -1 at a shared memory step
	Collective string // allreduce, allgatherv, alltoallv, sendrecv, broadcast or barrier
	// Seq is the collective's number as its caller counts (1 for the first). The
	// allgathervs with which a TCP job agrees on shared memory are numbered from 1 as well,
	// before the caller's, so a hook that targets a collective checks its kind too.
	Seq uint64
	// N, from 0, is the frame's index among the data frames this rank queued for the
	// collective, to any peer, or the step's index within a shared memory collective.
	N int
}

// FaultAction is what a fault hook makes a rank do at a fault point.
type FaultAction uint8

const (
	// FaultNone: the rank goes on.
	FaultNone FaultAction = iota
	// FaultCrash: the rank crashes there: its connections drop without a goodbye or an
	// abort, as if its process had died, and it sends nothing more; its own collectives
	// end only when it is closed, as a dead process's never end.
	FaultCrash
	// FaultReset: the rank's connections are reset there, as when its network fails: it
	// fails, naming itself, and so do its peers.
	FaultReset
)

// FaultHook is called at every fault point of a job, on the transport's goroutines and
// concurrently from several of them, so it must be safe for concurrent use. It may block
// (holding the rank at that point) or record the event, and returns what the rank does.
type FaultHook func(FaultEvent) FaultAction

// CrashIf is FaultCrash when crash holds, else FaultNone: the return of a hook that
// crashes a rank at one event.
func CrashIf(crash bool) FaultAction {
	if crash {
		return FaultCrash
	}
	return FaultNone
}

// ErrReset is the cause a rank whose connections a fault hook reset fails with.
var ErrReset = errors.New("connections reset at a fault point")

// WithFaultHook installs the fault hook of a job; a test passes it to every rank.
func WithFaultHook(h FaultHook) Option { return func(o *Options) { o.FaultHook = h } }

// ErrCrashed is what the rank that the fault hook crashed gets from the operation that
// was under way.
var ErrCrashed = errors.New("dist: crashed at a fault point")
