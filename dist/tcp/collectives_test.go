package tcp

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/disttest"
	"github.com/ssfusion/ssfusion/dist/internal/engine"
)

// algorithmVariants force each algorithm onto every size, so that the ring sees tiny and
// empty chunks and recursive doubling and the tree see large buffers.
var algorithmVariants = []struct {
	name string
	opts []dist.Option
}{
	{"default", nil},
	{"ring", []dist.Option{dist.WithSmallThreshold(-1), dist.WithSegmentSize(256)}},
	{"small", []dist.Option{dist.WithSegmentSize(dist.MaxSegmentSize), dist.WithSmallThreshold(dist.MaxSegmentSize)}},
}

// forEachJob runs check, as a subtest, on a job of every backend, algorithm variant and
// size from 1 to 5 ranks.
func forEachJob(t *testing.T, check func(t *testing.T, comms []dist.Communicator)) {
	for _, be := range backends {
		for _, v := range algorithmVariants {
			for P := 1; P <= 5; P++ {
				t.Run(fmt.Sprintf("%s/%s/P=%d", be.name, v.name, P), func(t *testing.T) {
					check(t, be.start(t, P, v.opts...))
				})
			}
		}
	}
}

func TestCollectivesMatchReference(t *testing.T) {
	disttest.CheckGoroutines(t)
	forEachJob(t, func(t *testing.T, comms []dist.Communicator) {
		for _, n := range []int{0, 1, 1009} {
			disttest.CheckAllReduce(t, comms, n)
			disttest.CheckAllGather(t, comms, n)
			disttest.CheckBroadcast(t, comms, n)
		}
		disttest.NoErrors(t, disttest.RunRanks(t, comms, 20*time.Second, func(r int, c dist.Communicator) error { return c.Barrier() }))
	})
}

// TestCollectivesLarge covers several-MB buffers, where the ring and chain pipeline many
// frames.
func TestCollectivesLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("large buffers")
	}
	disttest.CheckGoroutines(t)
	for _, be := range backends {
		for _, P := range []int{2, 3, 4} {
			t.Run(fmt.Sprintf("%s/P=%d", be.name, P), func(t *testing.T) {
				comms := be.start(t, P)
				mb := 3 << 20 // several MB
				if disttest.RaceEnabled {
					mb = 600 << 10 // still many segments
				}
				disttest.CheckAllReduce(t, comms, mb/4+17)
				disttest.CheckAllGather(t, comms, mb*2/3+5)
				disttest.CheckBroadcast(t, comms, mb+1)
			})
		}
	}
}

// TestDirectPlacement guards an optimisation that the results cannot show: in the copying
// phases, the reader puts most frames straight into the destination. How many frames arrive
// before their destination is known depends on scheduling, and a loaded machine can starve
// one rank, so the check gets a few attempts: a broken optimisation places none in any.
func TestDirectPlacement(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			var report []string
			for attempt := range 3 {
				report = directPlacement(t, be)
				if len(report) == 0 {
					return
				}
				t.Logf("attempt %d: %s", attempt+1, strings.Join(report, "; "))
			}
			t.Errorf("too few frames placed directly in every attempt: %s", strings.Join(report, "; "))
		})
	}
}

// directPlacement runs an allreduce, a broadcast and an allgatherv on 3 ranks and describes
// every rank that placed fewer than a sixth of its frames directly.
func directPlacement(t *testing.T, be backend) []string {
	const P = 3
	comms := be.start(t, P, dist.WithSegmentSize(64<<10))
	disttest.NoErrors(t, disttest.RunRanks(t, comms, 30*time.Second, func(r int, c dist.Communicator) error {
		if err := c.AllReduce(make([]float32, 1<<20), dist.Sum); err != nil {
			return err
		}
		if err := c.Broadcast(make([]byte, 4<<20), 0); err != nil {
			return err
		}
		_, err := c.AllGatherV(make([]byte, 4<<20))
		return err
	}))
	var short []string
	for r, c := range comms {
		e := c.(*engine.Engine)
		frames, direct := e.Counters().FramesRecv.Load(), e.Counters().Direct.Load()
		// Allreduce: a quarter of the frames can go in place (the allgather half, less
		// what arrives before this rank has sent its part); broadcast and allgatherv:
		// nearly all.
		if direct < frames/6 {
			short = append(short, fmt.Sprintf("rank %d: %d of %d frames placed directly", r, direct, frames))
		}
	}
	return short
}
