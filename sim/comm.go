package sim

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
)

// A simulated communicator runs collectives on a VirtualClock: each takes the time a
// CostModel predicts, from the moment the last rank issues it or the moment the network is
// free of the collectives issued before it, whichever is later (one collective at a time, as
// a single communication stream runs them). Whoever waits for it joins its end.
//
// NewSim gives ranks that are goroutines of this process and move real data (through the
// in-process backend), so that what a pipeline computes can be checked. NewSimRank gives one
// rank standing for a whole group of identical ranks: its collectives cost what they would
// among size ranks, while the data of the others is taken to be its own (see NewSimRank), so
// that a simulation of hundreds of ranks needs the memory of one.

// A CostModel predicts how long one collective takes on a group of size ranks; the
// simulated communicators advance virtual time by it. netmodel.Network is the project's.
type CostModel interface {
	// AllReduce of a buffer of bytes on every rank.
	AllReduce(size, bytes int) time.Duration
	// AllGatherV in which rank r contributes bytes[r]; len(bytes) == size.
	AllGatherV(size int, bytes []int) time.Duration
	// AllToAllV in which rank r sends sent[r] bytes in all to the others; len(sent) == size.
	AllToAllV(size int, sent []int) time.Duration
	// SendRecv in which rank r sends bytes[r] to one other rank; len(bytes) == size.
	SendRecv(size int, bytes []int) time.Duration
	// Broadcast of bytes from one rank to the others.
	Broadcast(size, bytes int) time.Duration
	// Barrier of size ranks.
	Barrier(size int) time.Duration
}

var _ CostModel = netmodel.Network{}

// NewSim returns the size communicators of a simulated job whose ranks are goroutines of
// this process; every rank's goroutines must run on clock.
func NewSim(size int, model CostModel, clock *VirtualClock) []dist.Communicator {
	inner := inproc.New(size)
	net := newSimNet(size, size, model)
	comms := make([]dist.Communicator, size)
	for r := range size {
		comms[r] = &simComm{net: net, clock: clock, rank: r, inner: inner[r]}
	}
	return comms
}

// NewSimRank returns rank 0 of a simulated job of size identical ranks, alone in this
// process. Its collectives advance clock as among size ranks, each sending as much as this
// one, and their results are what identical ranks would produce: AllReduce leaves the
// buffer as it is (Average) or multiplies it by size (Sum), Broadcast leaves it, and
// AllGatherV returns size messages, every one this rank's own unless the pipeline is a
// Mirrorer, whose mirror Simulate installs. The messages share one copy, so a caller must
// only read them.
func NewSimRank(size int, model CostModel, clock *VirtualClock) dist.Communicator {
	if size < 1 {
		panic(fmt.Sprintf("sim: NewSimRank(%d): size must be at least 1", size))
	}
	return &simComm{net: newSimNet(size, 1, model), clock: clock}
}

// An Exchanger is a pipeline whose SendRecv messages depend on the rank that sends them
// (SparDL's reduce-scatter, in which each rank holds its own blocks). A lone rank standing
// for identical ranks asks it what its from would send it.
type Exchanger interface {
	// ExchangeMessage returns what rank from would send this rank in the current
	// SendRecv, given own, what this rank sends. It must not modify own.
	ExchangeMessage(own []byte, from int) []byte
}

// A Mirrorer is a pipeline whose allgather messages depend on the rank that sends them
// (ExDyna's rotating partitions). A lone rank standing for identical ranks (NewSimRank)
// cannot give its own message as theirs: the union of the messages, and whatever follows
// from it, would be one rank's share instead of everyone's. When Simulate builds such a
// pipeline on a lone rank, the rank asks it for the other ranks' messages.
type Mirrorer interface {
	// MirrorMessage returns the allgather message that rank would send in this rank's
	// state, given own, this rank's message. It must not modify own.
	MirrorMessage(own []byte, rank int) []byte
}

// simNet is the network of a simulated job: the time it is busy until and the collectives
// waiting for ranks to issue them.
type simNet struct {
	size    int // ranks the cost model charges for
	issuers int // ranks that issue each collective: size, or 1 for a lone rank
	model   CostModel

	mu      sync.Mutex
	free    time.Duration // the network is busy until then
	pending map[int64]*simColl
}

func newSimNet(size, issuers int, model CostModel) *simNet {
	return &simNet{size: size, issuers: issuers, model: model, pending: make(map[int64]*simColl)}
}

// simColl is one collective on the virtual network.
type simColl struct {
	issued int
	latest time.Duration // the last issue among the ranks
	bytes  []int         // by rank: what each contributes, for an AllGatherV
	cost   func(bytes []int) time.Duration
	end    time.Duration
	timed  chan struct{} // closed once every rank issued and end is known
}

// issue registers rank's issue of collective seq at virtual time at, contributing bytes;
// the last rank to issue times it. A lone rank gives every rank's contribution in sizes,
// or nil when they all send as much as it does.
func (n *simNet) issue(seq int64, rank int, at time.Duration, bytes int, sizes []int, cost func([]int) time.Duration) *simColl {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.pending[seq]
	if c == nil {
		c = &simColl{bytes: make([]int, n.size), cost: cost, timed: make(chan struct{})}
		n.pending[seq] = c
	}
	c.issued++
	c.latest = max(c.latest, at)
	if n.issuers == 1 {
		for r := range c.bytes {
			c.bytes[r] = bytes
		}
		copy(c.bytes, sizes)
	} else {
		c.bytes[rank] = bytes
	}
	if c.issued == n.issuers {
		// Every rank issues collectives in one order, so the last issue of collective seq
		// comes after the last of seq-1: collectives are timed in their order.
		start := max(c.latest, n.free)
		c.end = start + c.cost(c.bytes)
		n.free = c.end
		delete(n.pending, seq)
		close(c.timed)
	}
	return c
}

// simComm is one rank of a simulated job.
type simComm struct {
	net   *simNet
	clock *VirtualClock
	rank  int
	inner dist.Communicator // moves the data; nil for a lone rank

	mu    sync.Mutex
	seq   int64
	stats dist.Stats
	// covered is the virtual time up to which Stats.Busy has counted: the simulated
	// network runs collectives one at a time, so they end in issue order, and each adds
	// the part of its interval past the end of the one before.
	covered  time.Duration
	mirror   func(own []byte, rank int) []byte
	exchange func(own []byte, from int) []byte
	closed   bool
}

// Clock implements pipeline.Clocked.
func (s *simComm) Clock() pipeline.Clock { return s.clock }

// Rank implements dist.Communicator.
func (s *simComm) Rank() int { return s.rank }

// Size implements dist.Communicator.
func (s *simComm) Size() int { return s.net.size }

// setExchange makes a lone rank's SendRecv return exchange(own, from); ranks that move
// real data ignore it.
func (s *simComm) setExchange(exchange func(own []byte, from int) []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exchange = exchange
}

// setMirror makes a lone rank's AllGatherV return mirror(own, r) as rank r's message;
// ranks that move real data ignore it.
func (s *simComm) setMirror(mirror func(own []byte, rank int) []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mirror = mirror
}

// start issues a collective of this rank: it stamps it, times it on the network and returns
// what the handle waits for.
func (s *simComm) start(op *dist.OpStats, bytes, sent int, sizes []int, cost func([]int) time.Duration) (*simColl, time.Duration, error) {
	at := s.clock.Elapsed()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, 0, dist.ErrClosed
	}
	seq := s.seq
	s.seq++
	op.Calls++
	op.BytesSent += int64(sent)
	s.stats.BytesSent += int64(sent)
	return s.net.issue(seq, s.rank, at, bytes, sizes, cost), at, nil
}

// AllReduce implements dist.Communicator.
func (s *simComm) AllReduce(buf []float32, op dist.Op) error { return s.AllReduceAsync(buf, op).Wait() }

// AllReduceAsync implements dist.Communicator.
func (s *simComm) AllReduceAsync(buf []float32, op dist.Op) dist.Handle {
	size := s.net.size
	m := 4 * len(buf)
	c, at, err := s.start(&s.stats.AllReduce, m, ringShare(m, size), nil, func(b []int) time.Duration { return s.net.model.AllReduce(size, b[0]) })
	if err != nil {
		return failed{err}
	}
	var inner dist.Handle
	if s.inner != nil {
		inner = s.inner.AllReduceAsync(buf, op)
	} else if op == dist.Sum && size > 1 {
		for i := range buf {
			buf[i] *= float32(size)
		}
	}
	return &simHandle{s: s, c: c, at: at, op: &s.stats.AllReduce, inner: inner}
}

// AllGatherV implements dist.Communicator.
func (s *simComm) AllGatherV(send []byte) ([][]byte, error) {
	return s.AllGatherVAsync(send).Wait()
}

// AllGatherVAsync implements dist.Communicator.
func (s *simComm) AllGatherVAsync(send []byte) dist.GatherHandle {
	size := s.net.size
	// A lone rank makes the others' messages first: mirrored ones may differ in size, and
	// the allgather costs what the largest receiver gets.
	var out [][]byte
	var sizes []int
	if s.inner == nil {
		out = s.mirrored(send)
		sizes = make([]int, size)
		for r, m := range out {
			sizes[r] = len(m)
		}
	}
	c, at, err := s.start(&s.stats.AllGatherV, len(send), (size-1)*len(send), sizes, func(b []int) time.Duration { return s.net.model.AllGatherV(size, b) })
	if err != nil {
		return failedGather{err}
	}
	h := &simHandle{s: s, c: c, at: at, op: &s.stats.AllGatherV, out: out}
	if s.inner != nil {
		h.gather = s.inner.AllGatherVAsync(send)
	}
	return simGather{h}
}

// mirrored is what a lone rank's AllGatherV returns: its own message for every rank, or
// the mirror's.
func (s *simComm) mirrored(send []byte) [][]byte {
	s.mu.Lock()
	mirror := s.mirror
	s.mu.Unlock()
	own := slices.Clone(send)
	out := make([][]byte, s.net.size)
	for r := range out {
		if r == s.rank || mirror == nil {
			out[r] = own
		} else {
			out[r] = mirror(own, r)
		}
	}
	return out
}

// AllToAllV implements dist.Communicator. A lone rank receives from every rank the block
// it addresses to itself: identical ranks address this rank what it addresses itself.
func (s *simComm) AllToAllV(send [][]byte) ([][]byte, error) {
	return s.AllToAllVAsync(send).Wait()
}

// AllToAllVAsync implements dist.Communicator.
func (s *simComm) AllToAllVAsync(send [][]byte) dist.GatherHandle {
	size := s.net.size
	if len(send) != size {
		return failedGather{fmt.Errorf("sim: alltoallv with %d blocks for %d ranks: %w", len(send), size, dist.ErrInvalid)}
	}
	var sent int
	var out [][]byte
	if s.inner == nil {
		own := slices.Clone(send[s.rank])
		out = make([][]byte, size)
		for r := range out {
			out[r] = own
		}
		// Identical ranks: block q of this rank stands for every rank's block to its
		// q-th neighbour, so the whole message is what each sends.
		for _, b := range send {
			sent += len(b)
		}
		sent -= len(send[s.rank])
	} else {
		for q, b := range send {
			if q != s.rank {
				sent += len(b)
			}
		}
	}
	c, at, err := s.start(&s.stats.AllToAllV, sent, sent, nil, func(b []int) time.Duration { return s.net.model.AllToAllV(size, b) })
	if err != nil {
		return failedGather{err}
	}
	h := &simHandle{s: s, c: c, at: at, op: &s.stats.AllToAllV, out: out}
	if s.inner != nil {
		h.gather = s.inner.AllToAllVAsync(send)
	}
	return simGather{h}
}

// SendRecv implements dist.Communicator. A lone rank receives from its from what it
// would send there itself unless the pipeline is an Exchanger, whose answer Simulate
// installs: identical ranks differ in what they hold for each other.
func (s *simComm) SendRecv(send []byte, to, from int) ([]byte, error) {
	size := s.net.size
	if to < 0 || to >= size || from < 0 || from >= size {
		return nil, fmt.Errorf("sim: sendrecv to rank %d from rank %d outside [0, %d): %w", to, from, size, dist.ErrInvalid)
	}
	sent := 0
	if to != s.rank {
		sent = len(send)
	}
	var out []byte
	var sizes []int
	if s.inner == nil {
		s.mu.Lock()
		exchange := s.exchange
		s.mu.Unlock()
		out = slices.Clone(send)
		busiest := sent
		if exchange != nil && from != s.rank {
			out = exchange(send, from)
			busiest = max(sent, len(out))
		}
		// Identical ranks send as much as this one, but a mirrored answer tells what the
		// busiest sender sends.
		sizes = make([]int, size)
		for r := range sizes {
			sizes[r] = busiest
		}
	}
	c, at, err := s.start(&s.stats.SendRecv, sent, sent, sizes, func(b []int) time.Duration { return s.net.model.SendRecv(size, b) })
	if err != nil {
		return nil, err
	}
	if s.inner != nil {
		if out, err = s.inner.SendRecv(send, to, from); err != nil {
			return nil, err
		}
	}
	h := &simHandle{s: s, c: c, at: at, op: &s.stats.SendRecv}
	h.finish()
	return out, nil
}

// Broadcast implements dist.Communicator.
func (s *simComm) Broadcast(buf []byte, root int) error { return s.BroadcastAsync(buf, root).Wait() }

// BroadcastAsync implements dist.Communicator.
func (s *simComm) BroadcastAsync(buf []byte, root int) dist.Handle {
	size := s.net.size
	if root < 0 || root >= size {
		return failed{fmt.Errorf("sim: broadcast root %d out of range [0, %d): %w", root, size, dist.ErrInvalid)}
	}
	sent := 0
	if s.rank == root {
		sent = len(buf)
	}
	c, at, err := s.start(&s.stats.Broadcast, len(buf), sent, nil, func(b []int) time.Duration { return s.net.model.Broadcast(size, b[0]) })
	if err != nil {
		return failed{err}
	}
	var inner dist.Handle
	if s.inner != nil {
		inner = s.inner.BroadcastAsync(buf, root)
	}
	return &simHandle{s: s, c: c, at: at, op: &s.stats.Broadcast, inner: inner}
}

// Barrier implements dist.Communicator.
func (s *simComm) Barrier() error {
	size := s.net.size
	c, at, err := s.start(&s.stats.Barrier, 0, 0, nil, func([]int) time.Duration { return s.net.model.Barrier(size) })
	if err != nil {
		return err
	}
	if s.inner != nil {
		if err := s.inner.Barrier(); err != nil {
			return err
		}
	}
	return (&simHandle{s: s, c: c, at: at, op: &s.stats.Barrier}).Wait()
}

// Stats implements dist.Communicator: bytes are what the modelled algorithms send, times
// are virtual.
func (s *simComm) Stats() dist.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Close implements dist.Communicator.
func (s *simComm) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	if s.inner != nil {
		return s.inner.Close()
	}
	return nil
}

// ringShare is what one rank sends in a ring allreduce of m bytes.
func ringShare(m, size int) int {
	if size < 2 {
		return 0
	}
	return int(int64(2*(size-1)) * int64(m) / int64(size))
}

// failed is the handle of a collective that could not be issued.
type failed struct{ err error }

func (f failed) Wait() error { return f.err }

// failedGather is failed for an AllGatherV.
type failedGather struct{ err error }

func (f failedGather) Wait() ([][]byte, error) { return nil, f.err }

// simHandle is the completion of a simulated collective.
type simHandle struct {
	s    *simComm
	c    *simColl
	at   time.Duration
	op   *dist.OpStats
	once sync.Once

	inner  dist.Handle       // the data movement of AllReduce and Broadcast, if real
	gather dist.GatherHandle // the data movement of AllGatherV and AllToAllV, if real
	out    [][]byte          // a lone rank's AllGatherV or AllToAllV result
}

// Wait implements dist.Handle.
func (h *simHandle) Wait() error {
	_, err := h.wait()
	return err
}

func (h *simHandle) wait() ([][]byte, error) {
	out, err := h.out, error(nil)
	switch {
	case h.inner != nil:
		err = h.inner.Wait()
	case h.gather != nil:
		out, err = h.gather.Wait()
	}
	if err != nil {
		return nil, err
	}
	h.finish()
	return out, nil
}

// finish waits for the collective's timing, joins its end and records its time once.
func (h *simHandle) finish() {
	<-h.c.timed
	h.s.clock.Join(h.s.clock.epoch.Add(h.c.end))
	h.once.Do(func() {
		h.s.mu.Lock()
		h.op.Time += h.c.end - h.at
		if h.c.end > h.s.covered {
			h.s.stats.Busy += h.c.end - max(h.at, h.s.covered)
			h.s.covered = h.c.end
		}
		h.s.mu.Unlock()
	})
}

// simGather adapts simHandle to dist.GatherHandle.
type simGather struct{ *simHandle }

func (g simGather) Wait() ([][]byte, error) { return g.wait() }
