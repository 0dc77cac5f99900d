package engine

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/disttest"
)

// fakeJob starts ranks 0..P-2 as real engines and returns rank P-1's raw connections
// (fake[r] reaches rank r), for tests that send what a broken peer would.
func fakeJob(t *testing.T, be string, P int, opts ...dist.Option) ([]*Engine, []net.Conn) {
	t.Helper()
	opts = append([]dist.Option{dist.WithLogger(disttest.QuietLog())}, opts...)
	engines := make([]*Engine, P-1)
	o, err := dist.NewOptions(dist.Options{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	conns := PipeMesh(P)
	if be == "tcp" {
		conns = disttest.TCPMesh(t, P)
	}
	for r := range P - 1 {
		engines[r] = New(r, P, conns[r], o)
	}
	fake := conns[P-1]
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
	b := make([]byte, HeaderSize, HeaderSize+len(payload))
	h.put(b)
	return append(b, payload...)
}

// TestBrokenPeer: a peer that sends garbage, truncated or oversized frames, an
// allgatherv size over the limit, or nothing at all, or that drops its connections,
// makes every other rank fail within bounded time with an error naming it. Rank 2 is the
// broken peer; it writes to rank `to`, and rank 1-`to` must learn of it from the others.
func TestBrokenPeer(t *testing.T) {
	disttest.CheckGoroutines(t)
	const P, bad = 3, 2
	arHeader := func(n uint64) header {
		return header{kind: frameData, coll: uint8(CollAllReduce), algo: algoRecDoubling, seq: 1, arg: n}
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
		{name: "oversize frame", to: 1, want: dist.ErrProtocol, wantMsg: "exceeds the limit of 16777216",
			send: frameBytes(header{kind: frameData, coll: uint8(CollAllReduce), seq: 1, length: dist.MaxSegmentSize + 1}, nil)},
		{name: "bad magic", to: 0, want: dist.ErrProtocol, wantMsg: "bad frame magic",
			send: []byte(strings.Repeat("GET / HTTP/1.1\r\n", 4))},
		{name: "unknown frame kind", to: 1, want: dist.ErrProtocol, wantMsg: "unknown frame kind 9",
			send: frameBytes(header{kind: 9}, nil)},
		{name: "truncated header", to: 1, close: true, want: dist.ErrConnLost, wantMsg: "middle of a frame (10 of 32 header bytes)",
			send: frameBytes(arHeader(1009), nil)[:10]},
		{name: "truncated payload", to: 1, close: true, want: dist.ErrConnLost, wantMsg: "middle of a frame (100 of 4036 payload bytes)",
			send: func() []byte { h := arHeader(1009); h.length = 4036; return frameBytes(h, make([]byte, 100)) }()},
		{name: "wrong size", to: 1, want: dist.ErrMismatch, wantMsg: "allreduce(sum, 1000 floats",
			send: func() []byte { h := arHeader(1000); h.length = 4000; return frameBytes(h, make([]byte, 4000)) }()},
		{name: "short payload", to: 1, want: dist.ErrProtocol, wantMsg: "16 payload bytes where 4036 were due",
			send: func() []byte { h := arHeader(1009); h.length = 16; return frameBytes(h, make([]byte, 16)) }()},
		{name: "allgatherv size over the limit", to: 0, gather: true, want: dist.ErrProtocol, wantMsg: "block of 1099511627776 bytes for rank 2 exceeds the limit",
			send: frameBytes(header{kind: frameData, coll: uint8(CollAllGatherV), algo: algoRing, seq: 1, arg: 1 << 40, arg2: bad, length: 8}, make([]byte, 8))},
		{name: "connection dropped", to: 0, close: true, want: dist.ErrConnLost, wantMsg: "connection closed during"},
		{name: "no heartbeat", to: 0, mute: true, want: dist.ErrTimeout, wantMsg: "timed out"},
	}
	for _, be := range []string{"inproc", "tcp"} {
		for _, tc := range cases {
			t.Run(be+"/"+tc.name, func(t *testing.T) {
				engines, fake := fakeJob(t, be, P, dist.WithTimeout(400*time.Millisecond), dist.WithMaxMessage(1<<20))
				if !tc.mute {
					for _, c := range fake {
						if c != nil {
							go io.Copy(io.Discard, c)
						}
					}
				}
				comms := []dist.Communicator{engines[0], engines[1]}
				start := time.Now()
				errs := disttest.RunRanks(t, comms, 15*time.Second, func(r int, c dist.Communicator) error {
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
					return c.AllReduce(make([]float32, 1009), dist.Sum)
				})
				said := false
				for r, err := range errs {
					disttest.WantPeerError(t, r, err, bad, "")
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

// TestFrameHeader round-trips headers and rejects bad ones before any allocation.
func TestFrameHeader(t *testing.T) {
	h := header{kind: frameData, coll: uint8(CollBroadcast), algo: algoChain, length: 12345, seq: 1 << 40, arg: 99, arg2: 3, arg3: 4}
	b := make([]byte, HeaderSize)
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
		"length":         bad(func(c []byte) { binary.LittleEndian.PutUint32(c[4:], dist.MaxSegmentSize+1) }),
		"seq 0":          bad(func(c []byte) { binary.LittleEndian.PutUint64(c[8:], 0) }),
		"heartbeat body": bad(func(c []byte) { c[1] = byte(frameHeartbeat) }),
		"abort length":   bad(func(c []byte) { c[1] = byte(frameAbort); binary.LittleEndian.PutUint32(c[4:], maxAbortText+1) }),
	} {
		if _, err := parseHeader(c); !errors.Is(err, dist.ErrProtocol) {
			t.Errorf("%s: %v, want dist.ErrProtocol", name, err)
		}
	}
}
