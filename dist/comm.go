package dist

import (
	"fmt"
	"time"
)

// Op selects how AllReduce combines the ranks' buffers.
type Op int

const (
	// Sum leaves the element-wise sum of all ranks' buffers.
	Sum Op = iota
	// Average leaves the element-wise sum divided by Size (an IEEE division, done after
	// the whole sum, so that it is the same on every rank).
	Average
)

func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Average:
		return "average"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Handle is the completion of an asynchronous collective. Wait blocks until the collective
// has finished on this rank and returns its error; it may be called any number of times.
type Handle interface {
	Wait() error
}

// GatherHandle is the completion of an asynchronous AllGatherV or AllToAllV.
type GatherHandle interface {
	Wait() ([][]byte, error)
}

// Communicator is one rank's view of a group of Size processes that run collectives
// together.
//
// Every rank must issue the same collectives in the same order, with matching arguments
// (the same length and Op for AllReduce, the same root and length for Broadcast): the n-th
// collective issued on one rank is matched with the n-th issued on every other, whatever
// its kind. Issue them from one goroutine, or order the calls otherwise; an async
// collective is issued when its method returns, not when it is waited for. Mismatches that
// the frames reveal (kind, length, op, root) fail the communicator on every rank.
//
// Any number of async collectives may be in flight at once; they progress concurrently.
// A buffer handed to an async collective belongs to the communicator until Wait returns.
//
// Results are bit-identical on every rank: each element of an AllReduce is summed in one
// fixed order, by one rank or by every rank with the same operands in the same order,
// and the result is then copied; it does not depend on timing.
//
// After any collective fails, the communicator is broken: every pending and later
// collective fails, on every rank, with a *PeerError naming the rank at fault. The
// buffers of a failed collective hold undefined contents.
//
// A rank learns of a failure when it next needs data: a collective in which a rank only
// sends (a broadcast root, a rank with nothing to add) may complete on that rank, and its
// next collective fails instead.
type Communicator interface {
	// Rank is this process's index in [0, Size).
	Rank() int
	// Size is the number of ranks.
	Size() int

	// AllReduce replaces buf, in place, by the element-wise combination of every
	// rank's buf. All ranks must pass buffers of the same length.
	AllReduce(buf []float32, op Op) error
	// AllReduceAsync starts an AllReduce; buf must not be touched until Wait returns.
	AllReduceAsync(buf []float32, op Op) Handle

	// AllGatherV returns every rank's send bytes, indexed by rank. Ranks may send
	// different lengths, zero included. The result, this rank's entry too, is newly
	// allocated and owned by the caller.
	AllGatherV(send []byte) ([][]byte, error)
	// AllGatherVAsync starts an AllGatherV; send must not be modified until Wait returns.
	AllGatherVAsync(send []byte) GatherHandle

	// AllToAllV sends send[p] to rank p, for every p, and returns what every rank sent
	// to this one, indexed by sender: the personalised exchange that a sparse
	// reduce-scatter needs. send must have Size entries of any lengths, zero included;
	// send[Rank()] comes back as a copy. The result is newly allocated and owned by the
	// caller.
	AllToAllV(send [][]byte) ([][]byte, error)
	// AllToAllVAsync starts an AllToAllV; send must not be modified until Wait returns.
	AllToAllVAsync(send [][]byte) GatherHandle

	// SendRecv sends send to rank to and returns what rank from sent this one: one
	// round of a point-to-point exchange in which every rank both sends and receives,
	// as a reduce-scatter's rounds do. The ranks' to must form a permutation whose
	// inverse is their from: rank to must name this rank as its from. A rank may send
	// to itself (to and from both its own rank). Lengths may differ. The result is newly
	// allocated and owned by the caller. Each round needs the one before, so it has no
	// asynchronous form.
	SendRecv(send []byte, to, from int) ([]byte, error)

	// Broadcast copies root's buf into every other rank's buf; all ranks pass buffers
	// of the same length.
	Broadcast(buf []byte, root int) error
	// BroadcastAsync starts a Broadcast; buf must not be touched until Wait returns.
	BroadcastAsync(buf []byte, root int) Handle

	// Barrier returns once every rank has entered it.
	Barrier() error

	// Stats reports the traffic and collective times since the communicator started.
	Stats() Stats

	// Close tells the peers that this rank leaves, fails this rank's pending
	// collectives with ErrClosed and releases every connection and goroutine. It does
	// not wait for the other ranks to close, only (at most a few seconds) for their
	// acknowledgement. Close after a failure is fine and returns nil.
	Close() error
}

// Stats are cumulative counters of one rank. Take the difference of two snapshots (Sub)
// to get the figures of one step.
//
// Bytes count data frames as they cross the wire: the 32-byte frame header plus the
// payload. Heartbeats, goodbyes, aborts and the connection handshake are counted apart as
// control bytes, so that a step's data traffic does not depend on how long it lasted.
type Stats struct {
	BytesSent, BytesRecv   int64
	FramesSent, FramesRecv int64
	ControlBytesSent       int64
	ControlBytesRecv       int64

	AllReduce  OpStats
	AllGatherV OpStats
	AllToAllV  OpStats
	SendRecv   OpStats
	Broadcast  OpStats
	Barrier    OpStats
	// Busy is the time during which at least one collective was in flight on this rank:
	// the union of their intervals, never more than the time that passed (CommTime sums
	// them instead).
	Busy time.Duration
}

// OpStats are the counters of one kind of collective.
type OpStats struct {
	Calls  int64 // collectives issued
	Failed int64 // collectives that returned an error
	// Time sums, over the collectives, the time from issue to completion on this rank.
	// Collectives in flight together each count their whole duration, so Time can exceed
	// the wall time they took.
	Time      time.Duration
	BytesSent int64 // data frame bytes, headers included
	BytesRecv int64
}

// Sub returns s - t, field by field: the activity between two snapshots.
func (s Stats) Sub(t Stats) Stats {
	return Stats{
		BytesSent:        s.BytesSent - t.BytesSent,
		BytesRecv:        s.BytesRecv - t.BytesRecv,
		FramesSent:       s.FramesSent - t.FramesSent,
		FramesRecv:       s.FramesRecv - t.FramesRecv,
		ControlBytesSent: s.ControlBytesSent - t.ControlBytesSent,
		ControlBytesRecv: s.ControlBytesRecv - t.ControlBytesRecv,
		AllReduce:        s.AllReduce.sub(t.AllReduce),
		AllGatherV:       s.AllGatherV.sub(t.AllGatherV),
		AllToAllV:        s.AllToAllV.sub(t.AllToAllV),
		SendRecv:         s.SendRecv.sub(t.SendRecv),
		Broadcast:        s.Broadcast.sub(t.Broadcast),
		Barrier:          s.Barrier.sub(t.Barrier),
		Busy:             s.Busy - t.Busy,
	}
}

// CommTime is the summed time of all collectives.
func (s Stats) CommTime() time.Duration {
	return s.AllReduce.Time + s.AllGatherV.Time + s.AllToAllV.Time + s.SendRecv.Time + s.Broadcast.Time + s.Barrier.Time
}

func (o OpStats) sub(p OpStats) OpStats {
	return OpStats{
		Calls:     o.Calls - p.Calls,
		Failed:    o.Failed - p.Failed,
		Time:      o.Time - p.Time,
		BytesSent: o.BytesSent - p.BytesSent,
		BytesRecv: o.BytesRecv - p.BytesRecv,
	}
}
