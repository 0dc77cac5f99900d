package tcp

import (
	"errors"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/disttest"
	"github.com/ssfusion/ssfusion/dist/internal/engine"
)

func TestAllToAllVMatchesReference(t *testing.T) {
	disttest.CheckGoroutines(t)
	forEachJob(t, func(t *testing.T, comms []dist.Communicator) {
		for _, n := range []int{0, 1, 1009, 70000} {
			disttest.CheckAllToAll(t, comms, n)
		}
	})
}

// TestAllToAllVInvalid: a rank that passes the wrong number of blocks, or one block over
// the message limit, fails the collective on every rank, naming itself.
func TestAllToAllVInvalid(t *testing.T) {
	disttest.CheckGoroutines(t)
	cases := []struct {
		name   string
		blocks func(r int) [][]byte
		want   string
	}{
		{"count", func(r int) [][]byte { return make([][]byte, 3+r%2*2) }, "alltoallv with 5 blocks for 3 ranks"},
		{"limit", func(r int) [][]byte {
			send := make([][]byte, 3)
			if r == 1 {
				send[2] = make([]byte, 2000)
			}
			return send
		}, "block of 2000 bytes for rank 2 exceeds the limit of 1000"},
	}
	for _, be := range backends {
		for _, tc := range cases {
			t.Run(be.name+"/"+tc.name, func(t *testing.T) {
				comms := be.start(t, 3, dist.WithMaxMessage(1000))
				errs := disttest.RunRanks(t, comms, 15*time.Second, func(r int, c dist.Communicator) error {
					_, err := c.AllToAllV(tc.blocks(r))
					return err
				})
				for r, err := range errs {
					disttest.WantPeerError(t, r, err, 1, tc.want)
					if !errors.Is(err, dist.ErrInvalid) {
						t.Errorf("rank %d: %v, want dist.ErrInvalid", r, err)
					}
				}
			})
		}
	}
}

// TestAllToAllVMismatch: ranks that issue an alltoallv where others issue something else
// all learn of it.
func TestAllToAllVMismatch(t *testing.T) {
	disttest.CheckGoroutines(t)
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			comms := be.start(t, 2)
			errs := disttest.RunRanks(t, comms, 15*time.Second, func(r int, c dist.Communicator) error {
				if r == 0 {
					_, err := c.AllToAllV([][]byte{{1}, {2, 3}})
					return err
				}
				_, err := c.AllGatherV([]byte{4})
				return err
			})
			for r, err := range errs {
				if !errors.Is(err, dist.ErrMismatch) {
					t.Errorf("rank %d: %v, want dist.ErrMismatch", r, err)
				}
			}
		})
	}
}

// TestAllToAllVStats: an alltoallv counts as one, and the bytes a rank sends are the
// blocks it addressed to others, plus frame headers.
func TestAllToAllVStats(t *testing.T) {
	comms := startInProc(t, 3)
	disttest.NoErrors(t, disttest.RunRanks(t, comms, 15*time.Second, func(r int, c dist.Communicator) error {
		_, err := c.AllToAllV([][]byte{make([]byte, 100), make([]byte, 200), make([]byte, 300)})
		return err
	}))
	for r, c := range comms {
		s := c.Stats().AllToAllV
		var want int64
		for q, n := range []int64{100, 200, 300} {
			if q != r {
				want += n + engine.HeaderSize
			}
		}
		if s.Calls != 1 || s.Failed != 0 || s.BytesSent != want {
			t.Errorf("rank %d: %+v, want 1 call and %d bytes sent", r, s, want)
		}
	}
}

func TestSendRecvMatchesReference(t *testing.T) {
	disttest.CheckGoroutines(t)
	forEachJob(t, func(t *testing.T, comms []dist.Communicator) {
		for _, n := range []int{0, 1009, 70000} {
			disttest.CheckSendRecv(t, comms, n)
		}
		if s, P := comms[0].Stats().SendRecv, len(comms); s.Calls != int64(3*P) {
			t.Errorf("rank 0 counted %d sendrecvs, want %d", s.Calls, 3*P)
		}
	})
}

func TestSendRecvMisuse(t *testing.T) {
	disttest.CheckGoroutines(t)
	for _, be := range backends {
		for _, tc := range disttest.SendRecvMisuse {
			t.Run(be.name+"/"+tc.Name, func(t *testing.T) {
				comms := be.start(t, 3, dist.WithTimeout(5*time.Second))
				errs := disttest.RunRanks(t, comms, 20*time.Second, func(r int, c dist.Communicator) error {
					to, from := tc.To(r)
					return disttest.Misuse(c, to, from)
				})
				disttest.CheckMisuse(t, errs, tc.Want, tc.Culprit, tc.Text)
			})
		}
	}
}
