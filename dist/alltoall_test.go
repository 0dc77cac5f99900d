package dist

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// exchangeData is the block rank from sends rank to in an alltoallv test: lengths differ
// by pair, and some pairs send nothing.
func exchangeData(from, to, n int) []byte {
	if (from+2*to)%4 == 3 {
		return nil
	}
	b := make([]byte, n+from*5+to*3)
	for i := range b {
		b[i] = byte(from*31 + to*7 + i)
	}
	return b
}

// checkAllToAll runs one alltoallv of blocks about n bytes long, and one issued
// asynchronously between two allreduces, and compares what every rank received with what
// was addressed to it.
func checkAllToAll(t *testing.T, comms []Communicator, n int) {
	t.Helper()
	P := len(comms)
	blocks := func(r int) [][]byte {
		send := make([][]byte, P)
		for q := range send {
			send[q] = exchangeData(r, q, n)
		}
		return send
	}
	got := make([][][]byte, P)
	gotAsync := make([][][]byte, P)
	noErrors(t, runRanks(t, comms, 30*time.Second, func(r int, c Communicator) error {
		var err error
		if got[r], err = c.AllToAllV(blocks(r)); err != nil {
			return err
		}
		first := c.AllReduceAsync(intData(r, 100), Sum)
		h := c.AllToAllVAsync(blocks(r))
		last := c.AllReduceAsync(intData(r, 50), Sum)
		if gotAsync[r], err = h.Wait(); err != nil {
			return err
		}
		return errors.Join(first.Wait(), last.Wait())
	}))
	for r := range P {
		for name, out := range map[string][][]byte{"alltoallv": got[r], "async alltoallv": gotAsync[r]} {
			if len(out) != P {
				t.Fatalf("%s n=%d rank %d: %d blocks, want %d", name, n, r, len(out), P)
			}
			for q := range P {
				if want := exchangeData(q, r, n); !bytes.Equal(out[q], want) || out[q] == nil {
					t.Fatalf("%s n=%d rank %d: block from rank %d has %d bytes, want %d", name, n, r, q, len(out[q]), len(want))
				}
				if q+1 < P && len(out[q]) > 0 && cap(out[q]) != len(out[q]) {
					t.Fatalf("%s n=%d rank %d: block from rank %d has room to grow into the next", name, n, r, q)
				}
			}
		}
	}
}

func TestAllToAllVMatchesReference(t *testing.T) {
	checkGoroutines(t)
	forEachJob(t, func(t *testing.T, comms []Communicator) {
		for _, n := range []int{0, 1, 1009, 70000} {
			checkAllToAll(t, comms, n)
		}
	})
}

// TestAllToAllVInvalid: a rank that passes the wrong number of blocks, or one block over
// the message limit, fails the collective on every rank, naming itself.
func TestAllToAllVInvalid(t *testing.T) {
	checkGoroutines(t)
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
				comms := be.start(t, 3, WithMaxMessage(1000))
				errs := runRanks(t, comms, 15*time.Second, func(r int, c Communicator) error {
					_, err := c.AllToAllV(tc.blocks(r))
					return err
				})
				for r, err := range errs {
					wantPeerError(t, r, err, 1, tc.want)
					if !errors.Is(err, ErrInvalid) {
						t.Errorf("rank %d: %v, want ErrInvalid", r, err)
					}
				}
			})
		}
	}
}

// TestAllToAllVMismatch: ranks that issue an alltoallv where others issue something else
// all learn of it.
func TestAllToAllVMismatch(t *testing.T) {
	checkGoroutines(t)
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			comms := be.start(t, 2)
			errs := runRanks(t, comms, 15*time.Second, func(r int, c Communicator) error {
				if r == 0 {
					_, err := c.AllToAllV([][]byte{{1}, {2, 3}})
					return err
				}
				_, err := c.AllGatherV([]byte{4})
				return err
			})
			for r, err := range errs {
				if !errors.Is(err, ErrMismatch) {
					t.Errorf("rank %d: %v, want ErrMismatch", r, err)
				}
			}
		})
	}
}

// TestAllToAllVStats: an alltoallv counts as one, and the bytes a rank sends are the
// blocks it addressed to others, plus frame headers.
func TestAllToAllVStats(t *testing.T) {
	comms := startInProc(t, 3)
	noErrors(t, runRanks(t, comms, 15*time.Second, func(r int, c Communicator) error {
		_, err := c.AllToAllV([][]byte{make([]byte, 100), make([]byte, 200), make([]byte, 300)})
		return err
	}))
	for r, c := range comms {
		s := c.Stats().AllToAllV
		var want int64
		for q, n := range []int64{100, 200, 300} {
			if q != r {
				want += n + headerSize
			}
		}
		if s.Calls != 1 || s.Failed != 0 || s.BytesSent != want {
			t.Errorf("rank %d: %+v, want 1 call and %d bytes sent", r, s, want)
		}
	}
}

// checkSendRecv runs a sendrecv for every shift of the ranks, the self exchange included,
// and compares what each rank received with what its from sent.
func checkSendRecv(t *testing.T, comms []Communicator, n int) {
	t.Helper()
	P := len(comms)
	got := make([][][]byte, P)
	noErrors(t, runRanks(t, comms, 30*time.Second, func(r int, c Communicator) error {
		for gap := range P {
			out, err := c.SendRecv(exchangeData(r, (r+gap)%P, n), (r+gap)%P, (r-gap+P)%P)
			if err != nil {
				return err
			}
			got[r] = append(got[r], out)
		}
		return nil
	}))
	for r := range P {
		for gap, out := range got[r] {
			from := (r - gap + P) % P
			if want := exchangeData(from, r, n); !bytes.Equal(out, want) || out == nil {
				t.Fatalf("sendrecv n=%d, shift %d: rank %d got %d bytes from rank %d, want %d", n, gap, r, len(out), from, len(want))
			}
		}
	}
}

func TestSendRecvMatchesReference(t *testing.T) {
	checkGoroutines(t)
	forEachJob(t, func(t *testing.T, comms []Communicator) {
		for _, n := range []int{0, 1009, 70000} {
			checkSendRecv(t, comms, n)
		}
		if s, P := comms[0].Stats().SendRecv, len(comms); s.Calls != int64(3*P) {
			t.Errorf("rank 0 counted %d sendrecvs, want %d", s.Calls, 3*P)
		}
	})
}

// sendRecvMisuse are the ways ranks can call a sendrecv wrongly, and what every rank's
// error must then be.
var sendRecvMisuse = []struct {
	name    string
	to      func(r int) (to, from int)
	want    error
	culprit int // -1: any
	text    string
}{
	{"out of range", func(r int) (int, int) {
		if r == 1 {
			return 3, 0
		}
		return (r + 1) % 3, (r + 2) % 3
	}, ErrInvalid, 1, "sendrecv to rank 3 from rank 0"},
	{"self and other", func(r int) (int, int) {
		if r == 2 {
			return 2, 1
		}
		return (r + 1) % 3, (r + 2) % 3
	}, ErrInvalid, 2, "to itself"},
	{"peers that do not pair up", func(r int) (int, int) {
		if r == 2 {
			return 1, 1 // rank 1 receives from 0
		}
		return (r + 1) % 3, (r + 2) % 3
	}, ErrMismatch, -1, ""},
}

func TestSendRecvMisuse(t *testing.T) {
	checkGoroutines(t)
	for _, be := range backends {
		for _, tc := range sendRecvMisuse {
			t.Run(be.name+"/"+tc.name, func(t *testing.T) {
				comms := be.start(t, 3, WithTimeout(5*time.Second))
				errs := runRanks(t, comms, 20*time.Second, func(r int, c Communicator) error {
					to, from := tc.to(r)
					return misuse(c, to, from)
				})
				checkMisuse(t, errs, tc.want, tc.culprit, tc.text)
			})
		}
	}
}

// misuse runs a sendrecv and, if this rank got its data before the others found the
// fault (a rank learns of a failure when it next needs data), the barrier after it.
func misuse(c Communicator, to, from int) error {
	if _, err := c.SendRecv([]byte{byte(c.Rank())}, to, from); err != nil {
		return err
	}
	return c.Barrier()
}

func checkMisuse(t *testing.T, errs []error, want error, culprit int, text string) {
	t.Helper()
	for r, err := range errs {
		if culprit >= 0 {
			wantPeerError(t, r, err, culprit, text)
		}
		if !errors.Is(err, want) {
			t.Errorf("rank %d: %v, want %v", r, err, want)
		}
	}
}
