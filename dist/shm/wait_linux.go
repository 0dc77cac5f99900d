//go:build linux

package shm

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/engine"
)

// How a rank waits for its peers: it looks at their arrive words in bursts of loads, and
// between bursts first lets the other goroutines of its process run (keeping its core) for
// spinFor, then also yields the core to other processes, and after shmYieldFor sleeps on
// a futex with a bounded timeout, after which it looks for failures again.
//
// Yielding the core costs most when another process is ready to run on it, however low its
// priority: the kernel then hands it the core for a whole time slice, a millisecond or more,
// while the peer may arrive a microsecond later. Ranks that yielded from the first burst on
// took many times Open MPI's time (which polls) beside a lowest-priority busy loop on every
// core (tools/bench-collectives/run.sh --busy). When the job has more ranks on this machine
// than it has cores, though, a rank that keeps its core may hold the very core its peer
// needs to arrive: ranks then yield from the first burst (spinFor 0).
const (
	shmSpinLoads  = 64                    // loads between yields
	shmSpinFor    = 50 * time.Microsecond // of keeping the core, when there are cores enough
	shmYieldFor   = time.Millisecond      // of yielding before sleeping
	shmSleepSlice = time.Millisecond      // longest futex sleep between failure checks
)

// spinBudget is how long the ranks of a job of ranks processes on a machine of cpus cores
// keep their core when they wait: shmSpinFor when every rank can have a core of its own,
// none otherwise.
func spinBudget(ranks, cpus int) time.Duration {
	if ranks <= cpus {
		return shmSpinFor
	}
	return 0
}

// onlineCPUs is the number of cores of this machine the kernel runs: not this process's
// share of them, which the launcher narrows to a rank's own core.
func onlineCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	return countCPUList(strings.TrimSpace(string(b)), runtime.NumCPU())
}

// countCPUList counts the cores of a kernel CPU list such as "0-3,8,10-11", or returns
// fallback when the list does not parse.
func countCPUList(list string, fallback int) int {
	n := 0
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return fallback
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return fallback
			}
		}
		n += b - a + 1
	}
	return n
}

// arrived reports whether an arrive word a has reached step st; steps wrap around.
func arrived(a, st uint32) bool { return int32(a-st) >= 0 }

// sync ends this rank's part of the next step and waits until every rank has ended it.
// It returns the step, whose parity selects the slots written before it.
func (s *shmComm) sync() (uint32, error) {
	if hook := s.e.Options().FaultHook; hook != nil {
		ev := dist.FaultEvent{Point: dist.FaultShmStep, Rank: s.rank, Peer: -1, Collective: s.cur.kind.String(), Seq: s.cur.seq, N: int(s.step - s.cur.step0)}
		switch hook(ev) {
		case dist.FaultCrash:
			s.kill()
			return 0, dist.ErrCrashed
		case dist.FaultReset:
			s.fail(engine.Fault{Rank: s.rank, Reporter: s.rank, Cause: fmt.Errorf("%w: %w", dist.ErrConnLost, dist.ErrReset)})
			s.e.Reset()
			return 0, dist.ErrReset
		}
	}
	s.step++
	st := s.step
	me := s.seg.arrive(s.rank)
	me.Store(st)
	if s.seg.sleepers(s.rank).Load() != 0 {
		futexWake(me)
	}
	return st, s.waitAll(st)
}

// nextParity is the parity of the step that the next sync ends: where this rank writes
// the data of that step.
func (s *shmComm) nextParity() uint32 { return (s.step + 1) & 1 }

// waitAll waits until every peer has arrived at step st, or fails: when a peer failed or
// closed, when the TCP mesh reports a dead peer, or after the timeout, naming the peer it
// waits on (every rank that arrived is past the previous step, so a rank missing here is
// not itself waiting on anyone).
func (s *shmComm) waitAll(st uint32) error {
	spins := 0
	var start time.Time
	for p := 0; p < s.size; {
		w := s.seg.arrive(p)
		if p == s.rank || arrived(w.Load(), st) {
			p++
			continue
		}
		if spins++; spins%shmSpinLoads != 0 {
			continue
		}
		now := s.now()
		if start.IsZero() {
			start = now
		}
		waited := now.Sub(start)
		if err := s.check(p, st, waited); err != nil {
			return err
		}
		switch {
		case waited < s.spinFor:
			runtime.Gosched() // a collective beside backward must not hold up the step's computation
		case waited < shmYieldFor:
			// The kernel's yield gives the core to other threads, but this goroutine keeps
			// its P: without the runtime's yield, a collective waiting beside backward
			// (an async one) would hold up the step's own computation, with
			// GOMAXPROCS=1 all of it, for up to shmYieldFor at every wait. The runtime's
			// yield also lets a peer that is a goroutine of this process (tests) run.
			runtime.Gosched()
			schedYield()
		default:
			sl := s.seg.sleepers(p)
			sl.Add(1)
			if v := w.Load(); !arrived(v, st) {
				futexWait(w, v, int64(shmSleepSlice))
			}
			sl.Add(^uint32(0))
		}
	}
	return nil
}

// check looks for a reason to stop waiting on peer p at step st after waited.
func (s *shmComm) check(p int, st uint32, waited time.Duration) error {
	if err := s.peersFailed(); err != nil {
		return err
	}
	if s.seg.state(p).Load() == shmClosed && !arrived(s.seg.arrive(p).Load(), st) {
		s.fail(engine.Fault{Rank: p, Reporter: s.rank, Cause: dist.ErrPeerClosed})
		return engine.ErrAborted
	}
	if t := s.e.Options().Timeout; t > 0 && waited > t {
		s.fail(engine.Fault{Rank: p, Reporter: s.rank, Cause: fmt.Errorf("%w: no progress for %v", dist.ErrTimeout, waited.Round(time.Millisecond))})
		return engine.ErrAborted
	}
	return nil
}
