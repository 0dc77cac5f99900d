package dist

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestKilledRank: a rank that crashes in the middle of a large allreduce (its connections
// drop without a word, at a fault point of one of its frames) makes every other rank fail,
// naming it, and so does every later collective. The timeout is long: the survivors must
// learn of the crash from the lost connections.
func TestKilledRank(t *testing.T) {
	checkGoroutines(t)
	const P, victim = 4, 2
	for _, be := range backends {
		for _, point := range []faultPoint{faultBeforeSend, faultPartialFrame, faultAfterSend} {
			t.Run(be.name+"/"+point.String(), func(t *testing.T) {
				// The victim crashes at its second frame: it has sent one, and the
				// others cannot finish without the rest.
				crash := withFaultHook(func(ev faultEvent) bool {
					return ev.rank == victim && ev.point == point && ev.kind == collAllReduce && ev.seq == 1 && ev.n == 1
				})
				comms := be.start(t, P, crash, WithTimeout(time.Minute))
				errs := runRanks(t, comms, 15*time.Second, func(r int, c Communicator) error {
					if r == victim {
						// Its own collective ends when it is closed, as a dead process's would
						// never end.
						c.AllReduceAsync(make([]float32, 1<<20), Sum)
						return nil
					}
					return c.AllReduce(make([]float32, 1<<20), Sum)
				})
				for r, err := range errs {
					if r == victim {
						continue
					}
					wantPeerError(t, r, err, victim, "during allreduce #1")
					if !errors.Is(err, ErrConnLost) {
						t.Errorf("rank %d: %v, want ErrConnLost", r, err)
					}
					t.Logf("rank %d: %v", r, err)
					// Later collectives fail at once, with the same culprit.
					wantPeerError(t, r, comms[r].Barrier(), victim, "during barrier #2")
				}
			})
		}
	}
}

// TestSilentRank: a rank that is connected (its heartbeats flow) but never issues the
// collective makes the others fail after about the timeout, naming it, under both
// algorithms; the silent rank's own next collective fails too.
func TestSilentRank(t *testing.T) {
	checkGoroutines(t)
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
				comms := be.start(t, P, WithTimeout(timeout))
				start := time.Now()
				errs := runRanks(t, comms, 15*time.Second, func(r int, c Communicator) error {
					if r == silent {
						return nil
					}
					return c.AllReduce(make([]float32, n), Sum)
				})
				elapsed := time.Since(start)
				for r, err := range errs {
					if r == silent {
						continue
					}
					wantPeerError(t, r, err, silent, "during allreduce #1")
					if !errors.Is(err, ErrTimeout) {
						t.Errorf("rank %d: %v, want ErrTimeout", r, err)
					}
					t.Logf("rank %d after %v: %v", r, elapsed.Round(time.Millisecond), err)
				}
				if elapsed < timeout {
					t.Errorf("failed after %v, before the timeout %v", elapsed, timeout)
				}
				// The silent rank was told. Its allreduce may still complete if the data it
				// needs arrived before the others gave up; its next collective fails.
				err := comms[silent].AllReduce(make([]float32, n), Sum)
				if err == nil {
					err = comms[silent].Barrier()
				}
				wantPeerError(t, silent, err, silent, "reported by rank")
			})
		}
	}
}

// TestMismatchedCollectives: ranks that issue different collectives, or the same with
// different sizes, under one sequence number fail instead of mixing data. A rank that
// only sends in the mismatched collective (a broadcast root, an empty allreduce) cannot
// tell at once; its next collective fails.
func TestMismatchedCollectives(t *testing.T) {
	checkGoroutines(t)
	cases := []struct {
		name  string
		run   func(r int, c Communicator) error
		later bool // no rank can tell during the collective itself
	}{
		{"allreduce sizes", func(r int, c Communicator) error { return c.AllReduce(make([]float32, 10+2*r), Sum) }, false},
		{"allreduce ops", func(r int, c Communicator) error { return c.AllReduce(make([]float32, 10), Op(r)) }, false},
		{"empty and not", func(r int, c Communicator) error { return c.AllReduce(make([]float32, 5*r), Sum) }, false},
		{"ring sizes", func(r int, c Communicator) error { return c.AllReduce(make([]float32, 100000+r), Sum) }, false},
		{"kinds", func(r int, c Communicator) error {
			if r == 0 {
				return c.Broadcast(make([]byte, 40), 0)
			}
			return c.AllReduce(make([]float32, 10), Sum)
		}, false},
		{"roots", func(r int, c Communicator) error { return c.Broadcast(make([]byte, 40), r) }, true},
	}
	for _, be := range backends {
		for _, tc := range cases {
			t.Run(be.name+"/"+tc.name, func(t *testing.T) {
				comms := be.start(t, 2, WithTimeout(5*time.Second))
				first := make([]error, 2)
				errs := runRanks(t, comms, 15*time.Second, func(r int, c Communicator) error {
					first[r] = tc.run(r, c)
					return c.Barrier()
				})
				if !tc.later && !errors.Is(first[0], ErrMismatch) && !errors.Is(first[1], ErrMismatch) {
					t.Errorf("the mismatched collective succeeded on both ranks: %v | %v", first[0], first[1])
				}
				for r, err := range errs {
					if !errors.Is(err, ErrMismatch) {
						t.Errorf("rank %d: next collective: %v, want ErrMismatch", r, err)
					}
				}
			})
		}
	}
}

// TestInvalidArgument: a bad argument on one rank fails it and, through the abort frame,
// the others, naming that rank.
func TestInvalidArgument(t *testing.T) {
	checkGoroutines(t)
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			comms := be.start(t, 3)
			errs := runRanks(t, comms, 15*time.Second, func(r int, c Communicator) error {
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
				wantPeerError(t, r, err, 1, "root 7 outside [0, 3)")
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("rank %d: %v, want ErrInvalid", r, err)
				}
			}
		})
	}
}

// fakeJob starts ranks 0..P-2 as real engines and returns rank P-1's raw connections
// (fake[r] reaches rank r), for tests that send what a broken peer would.
func fakeJob(t *testing.T, be string, P int, opts ...Option) ([]*engine, []net.Conn) {
	t.Helper()
	opts = append([]Option{WithLogger(quietLog())}, opts...)
	engines := make([]*engine, P-1)
	var fake []net.Conn
	switch be {
	case "inproc":
		var o options
		for _, opt := range opts {
			opt(&o)
		}
		if err := o.resolve(); err != nil {
			t.Fatal(err)
		}
		conns := pipeMesh(P)
		for r := range P - 1 {
			engines[r] = newEngine(r, P, conns[r], o)
		}
		fake = conns[P-1]
	case "tcp":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tmpl := TCPConfig{Size: P, MasterAddr: ln.Addr().String(), Token: "t", DialTimeout: 10 * time.Second, Logger: quietLog()}
		errs := make([]error, P)
		var wg sync.WaitGroup
		for r := range P {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cfg := tmpl
				cfg.Rank = r
				if r == 0 {
					cfg.Listener = ln
				}
				if r < P-1 {
					engines[r], errs[r] = dialTCP(context.Background(), cfg, opts)
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), cfg.DialTimeout)
				defer cancel()
				fake, errs[r] = (&rendezvous{cfg: cfg, log: quietLog()}).run(ctx)
			}()
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
	}
	t.Cleanup(func() {
		closeConns(fake)
		for _, e := range engines {
			e.Close()
		}
	})
	return engines, fake
}

func closeConns(conns []net.Conn) {
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}

func frameBytes(h header, payload []byte) []byte {
	b := make([]byte, headerSize, headerSize+len(payload))
	h.put(b)
	return append(b, payload...)
}

// TestBrokenPeer: a peer that sends garbage, truncated or oversized frames, an
// allgatherv size over the limit, or nothing at all, or that drops its connections,
// makes every other rank fail within bounded time with an error naming it. Rank 2 is the
// broken peer; it writes to rank `to`, and rank 1-`to` must learn of it from the others.
func TestBrokenPeer(t *testing.T) {
	checkGoroutines(t)
	const P, bad = 3, 2
	arHeader := func(n uint64) header {
		return header{kind: frameData, coll: uint8(collAllReduce), algo: algoRecDoubling, seq: 1, arg: n}
	}
	cases := []struct {
		name    string
		to      int
		gather  bool   // the real ranks run an allgatherv instead of an allreduce
		send    []byte // what rank 2 writes to rank `to`
		close   bool   // then close that connection (all of them if send is nil)
		mute    bool   // do not even read: the real ranks' writes get stuck too
		want    error
		wantMsg string
	}{
		{name: "oversize frame", to: 1, want: ErrProtocol, wantMsg: "exceeds the limit of 16777216",
			send: frameBytes(header{kind: frameData, coll: uint8(collAllReduce), seq: 1, length: maxFrame + 1}, nil)},
		{name: "bad magic", to: 0, want: ErrProtocol, wantMsg: "bad frame magic",
			send: []byte(strings.Repeat("GET / HTTP/1.1\r\n", 4))},
		{name: "unknown frame kind", to: 1, want: ErrProtocol, wantMsg: "unknown frame kind 9",
			send: frameBytes(header{kind: 9}, nil)},
		{name: "truncated header", to: 1, close: true, want: ErrConnLost, wantMsg: "middle of a frame (10 of 32 header bytes)",
			send: frameBytes(arHeader(1009), nil)[:10]},
		{name: "truncated payload", to: 1, close: true, want: ErrConnLost, wantMsg: "middle of a frame (100 of 4036 payload bytes)",
			send: func() []byte { h := arHeader(1009); h.length = 4036; return frameBytes(h, make([]byte, 100)) }()},
		{name: "wrong size", to: 1, want: ErrMismatch, wantMsg: "allreduce(sum, 1000 floats",
			send: func() []byte { h := arHeader(1000); h.length = 4000; return frameBytes(h, make([]byte, 4000)) }()},
		{name: "short payload", to: 1, want: ErrProtocol, wantMsg: "16 payload bytes where 4036 were due",
			send: func() []byte { h := arHeader(1009); h.length = 16; return frameBytes(h, make([]byte, 16)) }()},
		{name: "allgatherv size over the limit", to: 0, gather: true, want: ErrProtocol, wantMsg: "block of 1099511627776 bytes for rank 2 exceeds the limit",
			send: frameBytes(header{kind: frameData, coll: uint8(collAllGatherV), algo: algoRing, seq: 1, arg: 1 << 40, arg2: bad, length: 8}, make([]byte, 8))},
		{name: "connection dropped", to: 0, close: true, want: ErrConnLost, wantMsg: "connection closed during"},
		{name: "no heartbeat", to: 0, mute: true, want: ErrTimeout, wantMsg: "timed out"},
	}
	for _, be := range []string{"inproc", "tcp"} {
		for _, tc := range cases {
			t.Run(be+"/"+tc.name, func(t *testing.T) {
				engines, fake := fakeJob(t, be, P, WithTimeout(400*time.Millisecond), WithMaxMessage(1<<20))
				if !tc.mute {
					for _, c := range fake {
						if c != nil {
							go io.Copy(io.Discard, c)
						}
					}
				}
				comms := []Communicator{engines[0], engines[1]}
				start := time.Now()
				errs := runRanks(t, comms, 15*time.Second, func(r int, c Communicator) error {
					if r == tc.to && tc.send != nil {
						go func() {
							fake[r].Write(tc.send)
							if tc.close {
								fake[r].Close()
							}
						}()
					} else if r == tc.to && tc.close {
						closeConns(fake)
					}
					if tc.gather {
						_, err := c.AllGatherV(make([]byte, 100))
						return err
					}
					return c.AllReduce(make([]float32, 1009), Sum)
				})
				said := false
				for r, err := range errs {
					wantPeerError(t, r, err, bad, "")
					if !errors.Is(err, tc.want) {
						t.Errorf("rank %d: %v, want %v", r, err, tc.want)
					}
					said = said || (err != nil && strings.Contains(err.Error(), tc.wantMsg))
				}
				if !said {
					t.Errorf("no error says %q", tc.wantMsg)
				}
				t.Logf("after %v: %v | %v", time.Since(start).Round(time.Millisecond), errs[0], errs[1])
			})
		}
	}
}

// TestRejectedConnections: during the rendezvous, a connection that is not a dist peer,
// a rank with the wrong token and a rank with the wrong world size are rejected and
// logged with their remote address; the job forms anyway.
func TestRejectedConnections(t *testing.T) {
	checkGoroutines(t)
	const P = 3
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs capturedLog
	tmpl := TCPConfig{Size: P, MasterAddr: ln.Addr().String(), Token: "secret", DialTimeout: 10 * time.Second, Logger: quietLog()}

	engines := make([]*engine, P)
	errs := make([]error, P)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cfg := tmpl
		cfg.Logger = slogTo(&logs)
		cfg.Listener = ln
		engines[0], errs[0] = dialTCP(context.Background(), cfg, nil)
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
	for _, bad := range []TCPConfig{{Token: "guess"}, {Token: "secret", Size: P + 1}} {
		cfg := tmpl
		cfg.Rank, cfg.Token = 2, bad.Token
		if bad.Size != 0 {
			cfg.Size = bad.Size
		}
		_, err := DialTCP(context.Background(), cfg)
		if !errors.Is(err, ErrRejected) {
			t.Errorf("token %q size %d: %v, want ErrRejected", cfg.Token, cfg.Size, err)
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
			engines[r], errs[r] = dialTCP(context.Background(), cfg, nil)
		}()
	}
	wg.Wait()
	comms := make([]Communicator, P)
	for r := range P {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		comms[r] = engines[r]
	}
	t.Cleanup(func() { closeAll(comms) })
	noErrors(t, runRanks(t, comms, 10*time.Second, func(r int, c Communicator) error {
		return c.AllReduce(make([]float32, 100), Sum)
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
			if !errors.Is(accErr, ErrRejected) || !errors.Is(dialErr, ErrRejected) {
				t.Fatalf("accept: %v; dial: %v; want ErrRejected on both sides", accErr, dialErr)
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
	if err := dialHandshake(d, 1, 2, 0, "right"); !errors.Is(err, ErrRejected) {
		t.Errorf("dialing an acceptor with another token: %v, want ErrRejected", err)
	}
}

// TestFrameHeader round-trips headers and rejects bad ones before any allocation.
func TestFrameHeader(t *testing.T) {
	h := header{kind: frameData, coll: uint8(collBroadcast), algo: algoChain, length: 12345, seq: 1 << 40, arg: 99, arg2: 3, arg3: 4}
	b := make([]byte, headerSize)
	h.put(b)
	got, err := parseHeader(b)
	if err != nil || got != h {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, h)
	}
	bad := func(mut func([]byte)) []byte {
		c := append([]byte(nil), b...)
		mut(c)
		return c
	}
	for name, c := range map[string][]byte{
		"magic":          bad(func(c []byte) { c[0] = 0 }),
		"kind":           bad(func(c []byte) { c[1] = 0 }),
		"collective":     bad(func(c []byte) { c[2] = 0x0f }),
		"length":         bad(func(c []byte) { binary.LittleEndian.PutUint32(c[4:], maxFrame+1) }),
		"seq 0":          bad(func(c []byte) { binary.LittleEndian.PutUint64(c[8:], 0) }),
		"heartbeat body": bad(func(c []byte) { c[1] = byte(frameHeartbeat) }),
		"abort length":   bad(func(c []byte) { c[1] = byte(frameAbort); binary.LittleEndian.PutUint32(c[4:], maxAbortText+1) }),
	} {
		if _, err := parseHeader(c); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", name, err)
		}
	}
}
