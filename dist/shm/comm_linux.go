//go:build linux

package shm

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/engine"
)

// shmComm is the dist.Communicator of a job whose ranks all share one machine: collectives
// move data through a shared memory segment, in steps. At each step every rank writes
// its part into its own slot, announces the step (its arrive word), and waits until every
// other rank has announced it too; what the others wrote is then readable. Two slot
// parities alternate by step, and a rank reads a step's data before it announces the
// next, so a rank that has seen every peer announce step s may overwrite the data of
// step s-1: no other handshake is needed.
//
// The TCP mesh of the job stays open beside the segment. It is how ranks learn that a
// peer died (its sockets close at once when its process ends) and how a failure's
// report reaches every peer, as with the TCP backend.
//
// Collectives run one at a time, in issue order; an async collective runs on a goroutine
// of its own once the previous one has finished.
type shmComm struct {
	e          *engine.Engine
	seg        *segment
	rank, size int
	small      int           // bytes up to which every rank reduces a whole allreduce itself
	spinFor    time.Duration // how long a wait keeps its core before yielding it (waitAll)

	mu     sync.Mutex
	seq    uint64
	turn   sync.Cond     // on mu, broadcast when a collective finishes
	ran    atomic.Uint64 // the last finished collective; they finish in issue order
	closed bool
	flt    *engine.Fault
	broken atomic.Bool // flt or closed is set: waits stop
	killed atomic.Bool // a test's simulated crash: this rank reports nothing
	done   chan struct{}
	colls  sync.WaitGroup
	epoch  time.Time // for now

	// Only the running collective touches these.
	step uint32      // the last step
	srcs [][]float32 // operands of a sum, one per rank
	cur  *shmOp      // the running collective
}

func newShmComm(e *engine.Engine, seg *segment, small int) *shmComm {
	e.HideSetup()
	s := &shmComm{
		e: e, seg: seg, rank: e.Rank(), size: e.Size(), small: small,
		done: make(chan struct{}), epoch: time.Now(), spinFor: spinBudget(e.Size(), onlineCPUs()),
	}
	s.turn.L = &s.mu
	return s
}

// now is time.Now from the monotonic clock alone: time.Now also reads the wall clock,
// which on virtual machines costs as much again, and collectives read the clock often.
func (s *shmComm) now() time.Time { return s.epoch.Add(time.Since(s.epoch)) }

func (s *shmComm) Rank() int { return s.rank }
func (s *shmComm) Size() int { return s.size }

func (s *shmComm) Stats() dist.Stats { return s.e.Stats() }

func (s *shmComm) String() string {
	return fmt.Sprintf("dist.Communicator(rank %d of %d, shared memory)", s.rank, s.size)
}

// shmOp is one issued collective.
type shmOp struct {
	kind  engine.CollKind
	seq   uint64
	start time.Time
	// What dist.Stats reports: the volume of the bandwidth-optimal algorithm on a network,
	// not what this transport copies, so that traffic compares across backends.
	sent, recv int64
	step0      uint32 // the last step before the collective's first
}

// begin issues the next collective; its place in the order is taken here, in the
// caller's goroutine.
func (s *shmComm) begin(k engine.CollKind) (*shmOp, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("dist: %v: %w", k, dist.ErrClosed)
	}
	s.seq++
	op := &shmOp{kind: k, seq: s.seq, start: s.now()}
	s.colls.Add(1)
	s.e.Counters().Ops[k].Calls.Add(1)
	s.e.Counters().Busy.Start(op.start)
	return op, nil
}

// run waits for the previous collective, runs fn and finishes op.
func (s *shmComm) run(op *shmOp, fn func(op *shmOp) error) error {
	if s.ran.Load() != op.seq-1 {
		s.mu.Lock()
		for s.ran.Load() != op.seq-1 {
			s.turn.Wait()
		}
		s.mu.Unlock()
	}
	err := s.peersFailed()
	if err == nil {
		op.step0, s.cur = s.step, op
		err = fn(op)
	}
	return s.end(op, err)
}

// peersFailed adopts a failure that this rank has not noticed yet: one that its TCP mesh
// reported or that a peer published, maybe after it took part in the last step.
func (s *shmComm) peersFailed() error {
	if s.broken.Load() {
		return engine.ErrAborted
	}
	select {
	case <-s.e.Failed():
		if f := s.e.Fault(); f != nil {
			s.fail(*f)
		}
		return engine.ErrAborted
	default:
	}
	for q := range s.size {
		if q != s.rank && s.seg.state(q).Load() == shmFailed {
			s.fail(s.seg.faultOf(q))
			return engine.ErrAborted
		}
	}
	return nil
}

// end counts the collective and turns an internal error into the one the caller sees.
func (s *shmComm) end(op *shmOp, err error) error {
	c := &s.e.Counters().Ops[op.kind]
	if err != nil {
		s.mu.Lock()
		flt, closed := s.flt, s.closed
		s.mu.Unlock()
		switch {
		case flt != nil:
			err = &dist.PeerError{Rank: flt.Rank, Op: op.kind.String(), Seq: op.seq,
				Reporter: flt.Reporter, Self: s.rank, Err: flt.Cause}
		case closed:
			err = fmt.Errorf("dist: %v #%d: %w", op.kind, op.seq, dist.ErrClosed)
		default:
			s.fail(engine.Fault{Rank: s.rank, Reporter: s.rank, Cause: err})
			err = &dist.PeerError{Rank: s.rank, Op: op.kind.String(), Seq: op.seq,
				Reporter: s.rank, Self: s.rank, Err: err}
		}
		c.Failed.Add(1)
	}
	c.Sent.Add(op.sent)
	c.Recv.Add(op.recv)
	s.e.Counters().Sent.Add(op.sent)
	s.e.Counters().Recv.Add(op.recv)
	d := time.Since(op.start)
	c.Nanos.Add(int64(d))
	s.e.Counters().Busy.End(op.start.Add(d))
	s.mu.Lock()
	s.ran.Store(op.seq)
	s.turn.Broadcast()
	s.mu.Unlock()
	s.colls.Done()
	return err
}

// fail records the first fault and tells the peers: through the segment, which wakes
// them at once, and through the TCP mesh, which carries the report to every rank also
// when this one cannot write the segment any more.
func (s *shmComm) fail(f engine.Fault) {
	s.mu.Lock()
	if s.flt != nil || s.closed || s.killed.Load() {
		s.mu.Unlock()
		return
	}
	s.flt = &f
	s.broken.Store(true)
	s.mu.Unlock()
	s.seg.setFault(s.rank, f)
	s.wakeAll()
	s.e.Fail(f)
}

// wakeAll wakes every process asleep on any rank's arrive word, so that they look at the
// failure now instead of at their next timed wake-up.
func (s *shmComm) wakeAll() {
	for p := range s.size {
		futexWake(s.seg.arrive(p))
	}
}

// invalid fails the job for a bad argument of this rank.
func (s *shmComm) invalid(format string, args ...any) error {
	s.fail(engine.Fault{Rank: s.rank, Reporter: s.rank,
		Cause: fmt.Errorf("%w: "+format, append([]any{dist.ErrInvalid}, args...)...)})
	return engine.ErrAborted
}

// Close implements dist.Communicator.
func (s *shmComm) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return nil
	}
	s.closed = true
	failed := s.flt != nil || s.killed.Load()
	s.broken.Store(true)
	s.mu.Unlock()

	s.colls.Wait() // no collective touches the segment after this
	if !failed {
		s.seg.state(s.rank).Store(shmClosed)
		futexWake(s.seg.arrive(s.rank))
	}
	err := s.e.Close()
	s.seg.unmap()
	close(s.done)
	return err
}

// kill simulates a crash for tests: the TCP mesh drops without goodbye and this rank
// stops taking part, without a word in the segment.
func (s *shmComm) kill() {
	s.killed.Store(true)
	s.broken.Store(true)
	s.e.Kill()
}

var _ dist.Communicator = (*shmComm)(nil)
