package tcp

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/disttest"
)

// TestAsyncInFlight issues many collectives of every kind before waiting for any, and
// waits for them in an order of its own: all must complete with the right results.
func TestAsyncInFlight(t *testing.T) {
	disttest.CheckGoroutines(t)
	for _, be := range backends {
		for _, P := range []int{2, 3, 4} {
			t.Run(fmt.Sprintf("%s/P=%d", be.name, P), func(t *testing.T) {
				comms := be.start(t, P, dist.WithSegmentSize(4096))
				sizes := []int{1, 1009, 40000, 0, 70000, 7}
				disttest.NoErrors(t, disttest.RunRanks(t, comms, 30*time.Second, func(r int, c dist.Communicator) error {
					bufs := make([][]float32, len(sizes))
					reduces := make([]dist.Handle, len(sizes))
					gathers := make([]dist.GatherHandle, len(sizes))
					bcast := make([]byte, 50000)
					if r == P-1 {
						for i := range bcast {
							bcast[i] = byte(i * 7)
						}
					}
					var bh dist.Handle
					for i, n := range sizes {
						bufs[i] = disttest.IntData(r, n)
						reduces[i] = c.AllReduceAsync(bufs[i], dist.Sum)
						gathers[i] = c.AllGatherVAsync(disttest.GatherData(r, n))
						if i == 2 {
							bh = c.BroadcastAsync(bcast, P-1)
						}
					}
					if err := bh.Wait(); err != nil {
						return err
					}
					for i := range bcast {
						if bcast[i] != byte(i*7) {
							return fmt.Errorf("broadcast byte %d = %d", i, bcast[i])
						}
					}
					for i := len(sizes) - 1; i >= 0; i-- {
						parts, err := gathers[i].Wait()
						if err != nil {
							return err
						}
						for q := range P {
							if !bytes.Equal(parts[q], disttest.GatherData(q, sizes[i])) {
								return fmt.Errorf("allgatherv %d: part %d differs", i, q)
							}
						}
					}
					for i, h := range reduces {
						if err := h.Wait(); err != nil {
							return err
						}
						if err := h.Wait(); err != nil { // Wait may be repeated
							return err
						}
						want := make([]float32, sizes[i])
						for q := range P {
							for j, x := range disttest.IntData(q, sizes[i]) {
								want[j] += x
							}
						}
						if !slices.Equal(bufs[i], want) {
							return fmt.Errorf("allreduce %d (n=%d) differs from the reference", i, sizes[i])
						}
					}
					return c.Barrier()
				}))
			})
		}
	}
}

// TestAsyncOverlap shows that collectives in flight together share the links instead of
// queueing: on a shaped link, a small allreduce issued after a large allgatherv finishes
// long before it. (The large one needs about half a second; the small one a few frames.)
func TestAsyncOverlap(t *testing.T) {
	disttest.CheckGoroutines(t)
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			comms := be.start(t, 3, dist.WithBandwidth(50e6))
			var order [3][2]int32
			disttest.NoErrors(t, disttest.RunRanks(t, comms, 30*time.Second, func(r int, c dist.Communicator) error {
				big := c.AllGatherVAsync(make([]byte, 1500<<10))
				small := make([]float32, 300)
				sh := c.AllReduceAsync(small, dist.Average)
				var seq atomic.Int32
				errs := make(chan error, 2)
				go func() { _, err := big.Wait(); order[r][0] = seq.Add(1); errs <- err }()
				go func() { err := sh.Wait(); order[r][1] = seq.Add(1); errs <- err }()
				return errors.Join(<-errs, <-errs)
			}))
			for r, o := range order {
				if o[1] != 1 {
					t.Errorf("rank %d: the small allreduce finished after the large allgatherv issued before it: collectives did not overlap", r)
				}
			}
		})
	}
}

// TestClosedCommunicator: collectives after Close fail with dist.ErrClosed, pending ones too.
func TestClosedCommunicator(t *testing.T) {
	disttest.CheckGoroutines(t)
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			// Rank 0 issues a collective that rank 1 does not join yet, and closes once its
			// frame is out: the collective is then waiting on rank 1.
			sent := make(chan struct{})
			var once sync.Once
			comms := be.start(t, 2, dist.WithFaultHook(func(ev dist.FaultEvent) dist.FaultAction {
				if ev.Rank == 0 && ev.Point == dist.FaultAfterSend && ev.Seq == 1 {
					once.Do(func() { close(sent) })
				}
				return dist.FaultNone
			}))
			h := comms[0].AllReduceAsync(make([]float32, 10), dist.Sum)
			select {
			case <-sent:
			case <-time.After(10 * time.Second):
				t.Fatal("rank 0 did not send its part of the allreduce")
			}
			if err := comms[0].Close(); err != nil {
				t.Fatal(err)
			}
			if err := h.Wait(); !errors.Is(err, dist.ErrClosed) {
				t.Errorf("pending collective after Close: %v, want dist.ErrClosed", err)
			}
			if err := comms[0].Barrier(); !errors.Is(err, dist.ErrClosed) {
				t.Errorf("collective after Close: %v, want dist.ErrClosed", err)
			}
			if _, err := comms[0].AllGatherVAsync(nil).Wait(); !errors.Is(err, dist.ErrClosed) {
				t.Errorf("async collective after Close: %v, want dist.ErrClosed", err)
			}
			if err := comms[0].Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			// Rank 1 learns that rank 0 left when it needs it.
			err := comms[1].AllReduce(make([]float32, 10), dist.Sum)
			disttest.WantPeerError(t, 1, err, 0, "rank 0: closed its communicator during allreduce #1")
		})
	}
}

// TestCloseRightAfter: a rank that closes as soon as its last collective returns does
// not fail a peer that is still receiving that collective's last frames.
func TestCloseRightAfter(t *testing.T) {
	disttest.CheckGoroutines(t)
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			for range 10 {
				comms := be.start(t, 3)
				disttest.NoErrors(t, disttest.RunRanks(t, comms, 20*time.Second, func(r int, c dist.Communicator) error {
					if err := c.AllReduce(make([]float32, 1<<19), dist.Sum); err != nil {
						return err
					}
					if _, err := c.AllGatherV(make([]byte, 1<<19)); err != nil {
						return err
					}
					if err := c.Broadcast(make([]byte, 1<<19), 1); err != nil {
						return err
					}
					return c.Close()
				}))
			}
		})
	}
}
