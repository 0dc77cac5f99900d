//go:build linux

package shm

import (
	"fmt"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/disttest"
)

// TestShmAllToAllV covers pieces on cache lines of their own (default slots), pieces of
// odd widths (small slots), and blocks that take many steps.
func TestShmAllToAllV(t *testing.T) {
	disttest.CheckGoroutines(t)
	for _, g := range []struct {
		name  string
		chunk int
	}{{"default", defaultChunk}, {"tiny-slots", 256}} {
		for P := 2; P <= 5; P++ {
			t.Run(fmt.Sprintf("%s/P=%d", g.name, P), func(t *testing.T) {
				comms := startShmWith(t, geometry{g.chunk, defaultSmall}, P)
				for _, n := range []int{0, 1, 63, 1009, 70000} {
					disttest.CheckAllToAll(t, comms, n)
				}
				for r, c := range comms {
					s := c.Stats().AllToAllV
					if s.Calls != 10 || s.BytesSent == 0 || s.BytesRecv == 0 {
						t.Errorf("rank %d: %+v, want 10 calls that moved bytes", r, s)
					}
				}
			})
		}
	}
}

// TestPieceWidth: a P-th of the slot, whole cache lines where it spans one, so that blocks
// of a P-th of the default slot pass in one step; nothing when ranks outnumber the bytes
// (alltoallv then fails naming the setting to raise).
func TestPieceWidth(t *testing.T) {
	for _, c := range []struct{ chunk, P, want int }{
		{defaultChunk, 2, defaultChunk / 2},
		{defaultChunk, 3, 349504}, // 349525 rounded down to lines
		{320, 5, 64},
		{256, 5, 51},
		{64, 5, 12},
		{64, 65, 0},
	} {
		if got := pieceWidth(c.chunk, c.P); got != c.want {
			t.Errorf("pieceWidth(%d, %d) = %d, want %d", c.chunk, c.P, got, c.want)
		}
	}
}

func TestShmSendRecv(t *testing.T) {
	disttest.CheckGoroutines(t)
	for _, chunk := range []int{defaultChunk, 256} {
		for P := 2; P <= 5; P++ {
			t.Run(fmt.Sprintf("chunk=%d/P=%d", chunk, P), func(t *testing.T) {
				comms := startShmWith(t, geometry{chunk, defaultSmall}, P)
				for _, n := range []int{0, 63, 1009, 70000} {
					disttest.CheckSendRecv(t, comms, n)
				}
			})
		}
	}
	for _, tc := range disttest.SendRecvMisuse {
		t.Run(tc.Name, func(t *testing.T) {
			comms := startShm(t, 3)
			errs := disttest.RunRanks(t, comms, 20*time.Second, func(r int, c dist.Communicator) error {
				to, from := tc.To(r)
				return disttest.Misuse(c, to, from)
			})
			disttest.CheckMisuse(t, errs, tc.Want, tc.Culprit, tc.Text)
		})
	}
}
