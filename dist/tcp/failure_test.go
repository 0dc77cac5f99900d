package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/disttest"
	"github.com/ssfusion/ssfusion/dist/internal/engine"
)

// TestKilledRank: a rank that crashes in the middle of a large allreduce (its connections
// drop without a word, at a fault point of one of its frames) makes every other rank fail,
// naming it, and so does every later collective. The timeout is long: the survivors must
// learn of the crash from the lost connections.
func TestKilledRank(t *testing.T) {
	disttest.CheckGoroutines(t)
	const P, victim = 4, 2
	for _, be := range backends {
		for _, point := range []dist.FaultPoint{dist.FaultBeforeSend, dist.FaultPartialFrame, dist.FaultAfterSend} {
			t.Run(be.name+"/"+point.String(), func(t *testing.T) {
				// The victim crashes at its second frame: it has sent one, and the
				// others cannot finish without the rest.
				crash := dist.WithFaultHook(func(ev dist.FaultEvent) dist.FaultAction {
					return dist.CrashIf(ev.Rank == victim && ev.Point == point && ev.Collective == "allreduce" && ev.Seq == 1 && ev.N == 1)
				})
				comms := be.start(t, P, crash, dist.WithTimeout(time.Minute))
				errs := disttest.RunRanks(t, comms, 15*time.Second, func(r int, c dist.Communicator) error {
					if r == victim {
						// Its own collective ends when it is closed, as a dead process's would
						// never end.
						c.AllReduceAsync(make([]float32, 1<<20), dist.Sum)
						return nil
					}
					return c.AllReduce(make([]float32, 1<<20), dist.Sum)
				})
				for r, err := range errs {
					if r == victim {
						continue
					}
					disttest.WantPeerError(t, r, err, victim, "during allreduce #1")
					if !errors.Is(err, dist.ErrConnLost) {
						t.Errorf("rank %d: %v, want dist.ErrConnLost", r, err)
					}
					t.Logf("rank %d: %v", r, err)
					// Later collectives fail at once, with the same culprit.
					disttest.WantPeerError(t, r, comms[r].Barrier(), victim, "during barrier #2")
				}
			})
		}
	}
}

// TestResetRank: a rank whose connections are reset at a fault point fails at once,
// naming itself, and so does every other rank, naming it, long before the timeout.
func TestResetRank(t *testing.T) {
	disttest.CheckGoroutines(t)
	const P, victim = 4, 1
	for _, be := range backends {
		for _, point := range []dist.FaultPoint{dist.FaultBeforeSend, dist.FaultPartialFrame, dist.FaultAfterSend} {
			t.Run(be.name+"/"+point.String(), func(t *testing.T) {
				reset := dist.WithFaultHook(func(ev dist.FaultEvent) dist.FaultAction {
					if ev.Rank == victim && ev.Point == point && ev.Collective == "allreduce" && ev.Seq == 1 && ev.N == 1 {
						return dist.FaultReset
					}
					return dist.FaultNone
				})
				comms := be.start(t, P, reset, dist.WithTimeout(time.Minute))
				errs := disttest.RunRanks(t, comms, 15*time.Second, func(r int, c dist.Communicator) error {
					return c.AllReduce(make([]float32, 1<<20), dist.Sum)
				})
				for r, err := range errs {
					disttest.WantPeerError(t, r, err, victim, "during allreduce #1")
				}
				if !errors.Is(errs[victim], dist.ErrReset) {
					t.Errorf("rank %d: %v, want dist.ErrReset", victim, errs[victim])
				}
			})
		}
	}
}

// TestSilentRank: a rank that is connected (its heartbeats flow) but never issues the
// collective makes the others fail after about the timeout, naming it, under both
// algorithms; the silent rank's own next collective fails too.
func TestSilentRank(t *testing.T) {
	disttest.CheckGoroutines(t)
	const timeout = 300 * time.Millisecond
	cases := []struct{ P, silent, n int }{
		{3, 2, 1009},   // recursive doubling
		{3, 2, 100000}, // ring
		{4, 1, 100000}, // ring: ranks 3 and 0 wait behind rank 2, which waits on rank 1
	}
	for _, be := range backends {
		for _, tc := range cases {
			P, silent, n := tc.P, tc.silent, tc.n
			t.Run(fmt.Sprintf("%s/P=%d/n=%d", be.name, P, n), func(t *testing.T) {
				comms := be.start(t, P, dist.WithTimeout(timeout))
				start := time.Now()
				errs := disttest.RunRanks(t, comms, 15*time.Second, func(r int, c dist.Communicator) error {
					if r == silent {
						return nil
					}
					return c.AllReduce(make([]float32, n), dist.Sum)
				})
				elapsed := time.Since(start)
				for r, err := range errs {
					if r == silent {
						continue
					}
					disttest.WantPeerError(t, r, err, silent, "during allreduce #1")
					if !errors.Is(err, dist.ErrTimeout) {
						t.Errorf("rank %d: %v, want dist.ErrTimeout", r, err)
					}
					t.Logf("rank %d after %v: %v", r, elapsed.Round(time.Millisecond), err)
				}
				if elapsed < timeout {
					t.Errorf("failed after %v, before the timeout %v", elapsed, timeout)
				}
				// The silent rank was told. Its allreduce may still complete if the data it
				// needs arrived before the others gave up; its next collective fails.
				err := comms[silent].AllReduce(make([]float32, n), dist.Sum)
				if err == nil {
					err = comms[silent].Barrier()
				}
				disttest.WantPeerError(t, silent, err, silent, "reported by rank")
			})
		}
	}
}

// TestMismatchedCollectives: ranks that issue different collectives, or the same with
// different sizes, under one sequence number fail instead of mixing data. A rank that
// only sends in the mismatched collective (a broadcast root, an empty allreduce) cannot
// tell at once; its next collective fails.
func TestMismatchedCollectives(t *testing.T) {
	disttest.CheckGoroutines(t)
	cases := []struct {
		name  string
		run   func(r int, c dist.Communicator) error
		later bool // no rank can tell during the collective itself
	}{
		{"allreduce sizes", func(r int, c dist.Communicator) error { return c.AllReduce(make([]float32, 10+2*r), dist.Sum) }, false},
		{"allreduce ops", func(r int, c dist.Communicator) error { return c.AllReduce(make([]float32, 10), dist.Op(r)) }, false},
		{"empty and not", func(r int, c dist.Communicator) error { return c.AllReduce(make([]float32, 5*r), dist.Sum) }, false},
		{"ring sizes", func(r int, c dist.Communicator) error { return c.AllReduce(make([]float32, 100000+r), dist.Sum) }, false},
		{"kinds", func(r int, c dist.Communicator) error {
			if r == 0 {
				return c.Broadcast(make([]byte, 40), 0)
			}
			return c.AllReduce(make([]float32, 10), dist.Sum)
		}, false},
		{"roots", func(r int, c dist.Communicator) error { return c.Broadcast(make([]byte, 40), r) }, true},
	}
	for _, be := range backends {
		for _, tc := range cases {
			t.Run(be.name+"/"+tc.name, func(t *testing.T) {
				comms := be.start(t, 2, dist.WithTimeout(5*time.Second))
				first := make([]error, 2)
				errs := disttest.RunRanks(t, comms, 15*time.Second, func(r int, c dist.Communicator) error {
					first[r] = tc.run(r, c)
					return c.Barrier()
				})
				if !tc.later && !errors.Is(first[0], dist.ErrMismatch) && !errors.Is(first[1], dist.ErrMismatch) {
					t.Errorf("the mismatched collective succeeded on both ranks: %v | %v", first[0], first[1])
				}
				for r, err := range errs {
					if !errors.Is(err, dist.ErrMismatch) {
						t.Errorf("rank %d: next collective: %v, want dist.ErrMismatch", r, err)
					}
				}
			})
		}
	}
}

// TestInvalidArgument: a bad argument on one rank fails it and, through the abort frame,
// the others, naming that rank.
func TestInvalidArgument(t *testing.T) {
	disttest.CheckGoroutines(t)
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			comms := be.start(t, 3)
			errs := disttest.RunRanks(t, comms, 15*time.Second, func(r int, c dist.Communicator) error {
				root := 0
				if r == 1 {
					root = 7
				}
				if err := c.Broadcast(make([]byte, 100), root); err != nil {
					return err
				}
				// Ranks that did not need rank 1 in the broadcast learn of it now.
				return c.Barrier()
			})
			for r, err := range errs {
				disttest.WantPeerError(t, r, err, 1, "root 7 outside [0, 3)")
				if !errors.Is(err, dist.ErrInvalid) {
					t.Errorf("rank %d: %v, want dist.ErrInvalid", r, err)
				}
			}
		})
	}
}

// TestRejectedConnections: during the rendezvous, a connection that is not a dist peer,
// a rank with the wrong token and a rank with the wrong world size are rejected and
// logged with their remote address; the job forms anyway.
func TestRejectedConnections(t *testing.T) {
	disttest.CheckGoroutines(t)
	const P = 3
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs disttest.CapturedLog
	tmpl := Config{Size: P, MasterAddr: ln.Addr().String(), Token: "secret", DialTimeout: 10 * time.Second, Logger: disttest.QuietLog()}

	engines := make([]*engine.Engine, P)
	errs := make([]error, P)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cfg := tmpl
		cfg.Logger = disttest.SlogTo(&logs)
		cfg.Listener = ln
		engines[0], errs[0] = dial(context.Background(), cfg, nil)
	}()

	// A stray client that speaks another protocol.
	stray, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	stray.Write([]byte("GET / HTTP/1.0\r\n\r\n" + strings.Repeat("x", 64)))
	io.Copy(io.Discard, stray) // until rank 0 hangs up
	stray.Close()

	// Ranks that hold the wrong token or world size are refused with a clear error.
	for _, bad := range []Config{{Token: "guess"}, {Token: "secret", Size: P + 1}} {
		cfg := tmpl
		cfg.Rank, cfg.Token = 2, bad.Token
		if bad.Size != 0 {
			cfg.Size = bad.Size
		}
		_, err := Dial(context.Background(), cfg)
		if !errors.Is(err, dist.ErrRejected) {
			t.Errorf("token %q size %d: %v, want dist.ErrRejected", cfg.Token, cfg.Size, err)
		} else {
			t.Logf("refused: %v", err)
		}
	}

	for r := 1; r < P; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := tmpl
			cfg.Rank = r
			engines[r], errs[r] = dial(context.Background(), cfg, nil)
		}()
	}
	wg.Wait()
	comms := make([]dist.Communicator, P)
	for r := range P {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		comms[r] = engines[r]
	}
	t.Cleanup(func() { disttest.CloseAll(comms) })
	disttest.NoErrors(t, disttest.RunRanks(t, comms, 10*time.Second, func(r int, c dist.Communicator) error {
		return c.AllReduce(make([]float32, 100), dist.Sum)
	}))

	out := logs.String()
	for _, want := range []string{"rejected connection", stray.LocalAddr().String(), "not a dist peer", "wrong job token", "world size differs"} {
		if !strings.Contains(out, want) {
			t.Errorf("rank 0's log does not mention %q:\n%s", want, out)
		}
	}
}

// TestHandshake covers the acceptor's decisions one by one.
func TestHandshake(t *testing.T) {
	cases := []struct {
		name        string
		token, size int // dialer's token index and size
		rank        int
		claim       hsStatus
		want        hsStatus
	}{
		{"accepted", 0, 4, 2, hsOK, hsOK},
		{"wrong token", 1, 4, 2, hsOK, hsBadToken},
		{"wrong size", 0, 5, 2, hsOK, hsBadSize},
		{"duplicate rank", 0, 4, 2, hsDupRank, hsDupRank},
		{"unexpected rank", 0, 4, 2, hsBadRank, hsBadRank},
	}
	tokens := []string{"right", "wrong"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, d := net.Pipe()
			defer a.Close()
			defer d.Close()
			var accErr error
			var got int
			done := make(chan struct{})
			go func() {
				defer close(done)
				got, accErr = acceptHandshake(a, 1, 4, "right", func(int) hsStatus { return tc.claim })
			}()
			dialErr := dialHandshake(d, tc.rank, tc.size, 1, tokens[tc.token])
			<-done
			if tc.want == hsOK {
				if accErr != nil || dialErr != nil || got != tc.rank {
					t.Fatalf("accept: rank %d, %v; dial: %v", got, accErr, dialErr)
				}
				return
			}
			if !errors.Is(accErr, dist.ErrRejected) || !errors.Is(dialErr, dist.ErrRejected) {
				t.Fatalf("accept: %v; dial: %v; want dist.ErrRejected on both sides", accErr, dialErr)
			}
			if !strings.Contains(dialErr.Error(), tc.want.String()) {
				t.Errorf("dial error %q does not say %q", dialErr, tc.want)
			}
		})
	}

	// An acceptor without the token cannot pass itself off as a peer.
	a, d := net.Pipe()
	defer a.Close()
	defer d.Close()
	go acceptHandshake(a, 0, 2, "other", func(int) hsStatus { return hsOK })
	if err := dialHandshake(d, 1, 2, 0, "right"); !errors.Is(err, dist.ErrRejected) {
		t.Errorf("dialing an acceptor with another token: %v, want dist.ErrRejected", err)
	}
}
