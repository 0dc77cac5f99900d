//go:build mpi

package mpi

// The MPI tests run in every process of an mpirun job, one process per rank:
//
//	go test -c -tags mpi -o /tmp/dist_mpi.test ./dist/mpi
//	mpirun --allow-run-as-root --oversubscribe -np 3 /tmp/dist_mpi.test -test.run MPI
//
// Started without mpirun, the process is a job of size 1 and the same tests check the
// size-1 semantics. Every rank runs the same tests in the same order and so issues the
// same collectives; checks report with t.Errorf rather than stop a test on one rank
// only, which would leave the others waiting in a collective it skipped.
//
// MPI can be initialised once per process, so all the tests share one communicator
// (sharedMPI), and the tests that break it (an invalid argument, the failure scenarios)
// run last or in a process of their own (-mpi.scenario).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/disttest"
	"github.com/ssfusion/ssfusion/dist/internal/engine"
	"github.com/ssfusion/ssfusion/dist/internal/wire"
	"github.com/ssfusion/ssfusion/dist/tcp"
	"golang.org/x/sys/unix"
)

var mpiScenario = flag.String("mpi.scenario", "",
	"run the MPI failure scenario `name` (mismatch, peerclosed) instead of TestMPI; each needs an mpirun of its own")

var sharedMPIState struct {
	once, closeOnce sync.Once
	c               dist.Communicator
	err             error
}

// sharedMPI returns the process's MPI communicator, creating it on first use.
func sharedMPI(tb testing.TB) dist.Communicator {
	tb.Helper()
	s := &sharedMPIState
	s.once.Do(func() { s.c, s.err = New() })
	if s.err != nil {
		tb.Fatalf("New: %v", s.err)
	}
	return s.c
}

// closeSharedMPI finalises MPI: nothing may use it afterwards in this process.
func closeSharedMPI(tb testing.TB) {
	tb.Helper()
	s := &sharedMPIState
	s.closeOnce.Do(func() {
		if s.c != nil {
			if err := s.c.Close(); err != nil {
				tb.Errorf("Close: %v", err)
			}
		}
	})
}

// mpiBenchmarksFollow reports whether BenchmarkMPI will run after the tests, in which
// case the tests must leave the communicator open and unbroken.
func mpiBenchmarksFollow() bool {
	f := flag.Lookup("test.bench")
	if f == nil || f.Value.String() == "" {
		return false
	}
	re, err := regexp.Compile(strings.SplitN(f.Value.String(), "/", 2)[0])
	return err != nil || re.MatchString("BenchmarkMPI")
}

// floatsHash is a digest of the bits of x.
func floatsHash(x []float32) []byte {
	h := fnv.New64a()
	var b [4]byte
	for _, v := range x {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
		h.Write(b[:])
	}
	return h.Sum(nil)
}

// sameEverywhere checks that every rank holds the same digest.
func sameEverywhere(t *testing.T, c dist.Communicator, what string, digest []byte) {
	t.Helper()
	all, err := c.AllGatherV(digest)
	if err != nil {
		t.Errorf("%s: allgather of digests: %v", what, err)
		return
	}
	for r, d := range all {
		if !bytes.Equal(d, all[0]) {
			t.Errorf("%s: rank %d's result differs from rank 0's: not bit-identical", what, r)
		}
	}
}

func TestMPI(t *testing.T) {
	if *mpiScenario != "" {
		t.Skip("running the failure scenario " + *mpiScenario)
	}
	c := sharedMPI(t)
	P, me := c.Size(), c.Rank()

	t.Run("Job", func(t *testing.T) {
		if !Available {
			t.Error("Available is false in a build with the mpi tag")
		}
		wantRank, wantSize := 0, 1
		if s, ok := os.LookupEnv(tcp.EnvOMPISize); ok {
			wantSize, _ = strconv.Atoi(s)
			wantRank, _ = strconv.Atoi(os.Getenv(tcp.EnvOMPIRank))
		}
		if me != wantRank || P != wantSize {
			t.Errorf("rank %d of %d, want %d of %d (mpirun's environment)", me, P, wantRank, wantSize)
		}
		if _, err := New(); err == nil || !strings.Contains(err.Error(), "already initialised") {
			t.Errorf("second New: %v, want an error saying MPI is already initialised", err)
		}
	})

	t.Run("AllReduce", func(t *testing.T) {
		for _, n := range []int{0, 1, 5, 1000, 16<<10 + 3, 1<<20 + 7} {
			for _, op := range []dist.Op{dist.Sum, dist.Average} {
				// Exactly summable data against the sequential reference.
				want := make([]float32, n)
				for r := range P {
					for i, x := range disttest.IntData(r, n) {
						want[i] += x
					}
				}
				if op == dist.Average {
					wire.DivideBy(want, float32(P))
				}
				got := disttest.IntData(me, n)
				if err := c.AllReduce(got, op); err != nil {
					t.Errorf("allreduce %v n=%d: %v", op, n, err)
					continue
				}
				if i := disttest.FirstDiff(got, want); i >= 0 {
					t.Errorf("allreduce %v n=%d: element %d = %v, want %v", op, n, i, got[i], want[i])
				}

				// Order-sensitive data: close to the float64 reference.
				ref, mag := make([]float64, n), make([]float64, n)
				for r := range P {
					for i, x := range disttest.RandData(r, n) {
						ref[i] += float64(x)
						mag[i] += math.Abs(float64(x))
					}
				}
				got = disttest.RandData(me, n)
				if err := c.AllReduce(got, op); err != nil {
					t.Errorf("allreduce %v n=%d: %v", op, n, err)
					continue
				}
				for i := range n {
					w, m := ref[i], mag[i]
					if op == dist.Average {
						w, m = w/float64(P), m/float64(P)
					}
					if d := math.Abs(float64(got[i]) - w); d > 1e-6*m*float64(P) {
						t.Errorf("allreduce %v n=%d: element %d = %v, want %v", op, n, i, got[i], w)
						break
					}
				}
			}
		}
	})

	t.Run("BitIdentical", func(t *testing.T) {
		// Sizes on either side of libnbc's switch between algorithms (64 KiB).
		for _, n := range []int{3, 4096, 16 << 10, 1<<20 + 1} {
			for _, op := range []dist.Op{dist.Sum, dist.Average} {
				buf := disttest.RandData(me*7919+n, n)
				if err := c.AllReduce(buf, op); err != nil {
					t.Errorf("allreduce %v n=%d: %v", op, n, err)
					continue
				}
				sameEverywhere(t, c, fmt.Sprintf("allreduce %v n=%d", op, n), floatsHash(buf))
			}
		}
	})

	t.Run("AllGatherV", func(t *testing.T) {
		check := func(what string, mine []byte, data func(r int) []byte) {
			t.Helper()
			got, err := c.AllGatherV(mine)
			if err != nil {
				t.Errorf("%s: %v", what, err)
				return
			}
			if len(got) != P {
				t.Errorf("%s: %d parts, want %d", what, len(got), P)
				return
			}
			for r, part := range got {
				if want := data(r); !bytes.Equal(part, want) || len(part) != len(want) {
					t.Errorf("%s: rank %d's part has %d bytes %.8x..., want %d bytes %.8x...", what, r, len(part), part, len(want), want)
				}
				if cap(part) != len(part) {
					t.Errorf("%s: part %d has room beyond its bytes (cap %d, len %d)", what, r, cap(part), len(part))
				}
			}
			if len(mine) > 0 {
				mine[0]++ // the result is a copy
				if got[me][0] == mine[0] {
					t.Errorf("%s: this rank's part shares memory with its send buffer", what)
				}
				mine[0]--
			}
		}
		for _, n := range []int{0, 1, 1000, 100000} {
			// Ranks r%3 == 2 send nothing.
			check(fmt.Sprintf("n=%d", n), disttest.GatherData(me, n), func(r int) []byte { return disttest.GatherData(r, n) })
		}
		sized := func(r int) []byte { // rank 0 empty, the others of very different sizes
			b := make([]byte, r*r*5000)
			for i := range b {
				b[i] = byte(i*r + 1)
			}
			return b
		}
		check("sizes r*r*5000", sized(me), sized)
		check("all empty", nil, func(int) []byte { return nil })
	})

	t.Run("Broadcast", func(t *testing.T) {
		fill := func(r, n int) []byte {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(r*37 + i*3)
			}
			return b
		}
		for root := range P {
			for _, n := range []int{0, 1, 1000, 1 << 20} {
				buf := fill(me, n)
				if err := c.Broadcast(buf, root); err != nil {
					t.Errorf("broadcast from %d n=%d: %v", root, n, err)
					continue
				}
				if want := fill(root, n); !bytes.Equal(buf, want) {
					t.Errorf("broadcast from %d n=%d: buffer differs from the root's", root, n)
				}
			}
			f := disttest.RandData(root+100, 333)
			if me != root {
				f = make([]float32, 333)
			}
			if err := dist.BroadcastFloat32(c, f, root); err != nil {
				t.Errorf("dist.BroadcastFloat32 from %d: %v", root, err)
			} else if i := disttest.FirstBitDiff(f, disttest.RandData(root+100, 333)); i >= 0 {
				t.Errorf("dist.BroadcastFloat32 from %d: element %d differs", root, i)
			}
		}
	})

	t.Run("AllToAllV", func(t *testing.T) {
		for _, n := range []int{0, 1, 1009, 1 << 20} {
			send := make([][]byte, P)
			for q := range send {
				send[q] = disttest.ExchangeData(me, q, n)
			}
			got, err := c.AllToAllV(send)
			if err != nil {
				t.Errorf("alltoallv n=%d: %v", n, err)
				continue
			}
			if len(got) != P {
				t.Errorf("alltoallv n=%d: %d blocks, want %d", n, len(got), P)
				continue
			}
			for q := range P {
				if want := disttest.ExchangeData(q, me, n); !bytes.Equal(got[q], want) || got[q] == nil {
					t.Errorf("alltoallv n=%d: block from rank %d has %d bytes, want %d", n, q, len(got[q]), len(want))
				}
			}
		}
	})

	t.Run("AllToAllVWithoutRankZero", func(t *testing.T) {
		// Rank 0 neither sends nor receives, the others exchange: every rank must still
		// take part in the same MPI collectives.
		send := make([][]byte, P)
		for q := 1; q < P && me > 0; q++ {
			send[q] = []byte{byte(me), byte(q)}
		}
		got, err := c.AllToAllV(send)
		if err != nil {
			t.Fatal(err)
		}
		for q := range P {
			want := []byte{byte(q), byte(me)}
			if q == 0 || me == 0 {
				want = []byte{}
			}
			if !bytes.Equal(got[q], want) {
				t.Errorf("block from rank %d: %v, want %v", q, got[q], want)
			}
		}
		if err := c.Barrier(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("SendRecv", func(t *testing.T) {
		for gap := range P {
			to, from := (me+gap)%P, (me-gap+P)%P
			for _, n := range []int{0, 1009, 1 << 20} {
				got, err := c.SendRecv(disttest.ExchangeData(me, to, n), to, from)
				if err != nil {
					t.Errorf("sendrecv shift %d n=%d: %v", gap, n, err)
				} else if want := disttest.ExchangeData(from, me, n); !bytes.Equal(got, want) || got == nil {
					t.Errorf("sendrecv shift %d n=%d: %d bytes from rank %d, want %d", gap, n, len(got), from, len(want))
				}
			}
		}
	})

	t.Run("Barrier", func(t *testing.T) {
		// Nobody may leave before the last one entered. The ranks share the machine's
		// monotonic clock: each notes when it entered and when it left, and compares
		// its leaving with everyone's entering.
		var entered, left unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &entered); err != nil {
			t.Fatal(err)
		}
		if err := c.Barrier(); err != nil {
			t.Fatalf("barrier: %v", err)
		}
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &left); err != nil {
			t.Fatal(err)
		}
		all, err := c.AllGatherV(binary.LittleEndian.AppendUint64(nil, uint64(entered.Nano())))
		if err != nil {
			t.Fatalf("allgatherv: %v", err)
		}
		for q, b := range all {
			if len(b) != 8 {
				t.Fatalf("rank %d sent %d bytes, want 8", q, len(b))
			}
			if e := int64(binary.LittleEndian.Uint64(b)); e > left.Nano() {
				t.Errorf("left the barrier %v before rank %d entered it", time.Duration(e-left.Nano()), q)
			}
		}
	})

	t.Run("Async", func(t *testing.T) {
		// Collectives of every kind in flight together, a large one among them, waited
		// for in the reverse order.
		type check func() error
		var checks []check
		for i := range 24 {
			switch i % 4 {
			case 0, 1:
				n := 1000 + 100*i
				if i == 4 {
					n = 1 << 20 // 4 MB
				}
				op := dist.Op(i % 2)
				buf := disttest.IntData(me+i, n)
				want := make([]float32, n)
				for r := range P {
					for j, x := range disttest.IntData(r+i, n) {
						want[j] += x
					}
				}
				if op == dist.Average {
					wire.DivideBy(want, float32(P))
				}
				h := c.AllReduceAsync(buf, op)
				checks = append(checks, func() error {
					if err := h.Wait(); err != nil {
						return err
					}
					if j := disttest.FirstDiff(buf, want); j >= 0 {
						return fmt.Errorf("allreduce #%d: element %d = %v, want %v", i, j, buf[j], want[j])
					}
					return nil
				})
			case 2:
				h := c.AllGatherVAsync(disttest.GatherData(me, 100*i))
				checks = append(checks, func() error {
					parts, err := h.Wait()
					if err != nil {
						return err
					}
					for r, p := range parts {
						if !bytes.Equal(p, disttest.GatherData(r, 100*i)) {
							return fmt.Errorf("allgatherv #%d: rank %d's part differs", i, r)
						}
					}
					return nil
				})
			case 3:
				root := i % P
				buf := bytes.Repeat([]byte{byte(me)}, 5000+i)
				h := c.BroadcastAsync(buf, root)
				checks = append(checks, func() error {
					if err := h.Wait(); err != nil {
						return err
					}
					if !bytes.Equal(buf, bytes.Repeat([]byte{byte(root)}, 5000+i)) {
						return fmt.Errorf("broadcast #%d: buffer differs from root %d's", i, root)
					}
					return nil
				})
			}
		}
		for i := len(checks) - 1; i >= 0; i-- {
			if err := checks[i](); err != nil {
				t.Error(err)
			}
		}
		h := c.BroadcastAsync(nil, 0)
		for range 2 { // Wait may be called again
			if err := h.Wait(); err != nil {
				t.Errorf("empty async broadcast: %v", err)
			}
		}
	})

	t.Run("dist.Stats", func(t *testing.T) {
		s0 := c.Stats()
		if err := c.AllReduce(make([]float32, 1000), dist.Sum); err != nil {
			t.Fatal(err)
		}
		if err := c.Broadcast(make([]byte, 100), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AllGatherV(make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
		if err := c.Barrier(); err != nil {
			t.Fatal(err)
		}
		d := c.Stats().Sub(s0)
		for _, o := range []struct {
			name string
			s    dist.OpStats
		}{{"allreduce", d.AllReduce}, {"broadcast", d.Broadcast}, {"allgatherv", d.AllGatherV}, {"barrier", d.Barrier}} {
			if o.s.Calls != 1 || o.s.Failed != 0 || o.s.Time <= 0 {
				t.Errorf("%s: %+v, want 1 call, no failure, some time", o.name, o.s)
			}
		}
		wantAR := 2 * int64(P-1) * 4000 / int64(P)
		if d.AllReduce.BytesSent != wantAR || d.AllReduce.BytesRecv != wantAR {
			t.Errorf("allreduce bytes %d sent, %d received, want %d both", d.AllReduce.BytesSent, d.AllReduce.BytesRecv, wantAR)
		}
		if want := int64(10 * (P - 1)); d.AllGatherV.BytesRecv != want {
			t.Errorf("allgatherv received %d bytes, want %d", d.AllGatherV.BytesRecv, want)
		}
		sum := d.AllReduce.BytesSent + d.Broadcast.BytesSent + d.AllGatherV.BytesSent + d.Barrier.BytesSent
		if d.BytesSent != sum {
			t.Errorf("BytesSent %d, want the sum over the collectives %d", d.BytesSent, sum)
		}
		if want := int64(4 * 8 * descWidth(P) * (P - 1)); d.ControlBytesSent != want {
			t.Errorf("control bytes sent %d, want %d (four descriptor exchanges)", d.ControlBytesSent, want)
		}
	})

	if mpiBenchmarksFollow() {
		t.Log("BenchmarkMPI follows: the communicator stays open and unbroken")
		return
	}

	t.Run("InvalidRoot", func(t *testing.T) {
		// The last rank passes a root out of range, the others a good one: every rank
		// fails, naming it, and the communicator is broken.
		bad := P - 1
		root := 0
		if me == bad {
			root = P
		}
		err := c.Broadcast(make([]byte, 10), root)
		t.Logf("rank %d: %v", me, err)
		disttest.WantPeerError(t, me, err, bad, fmt.Sprintf("broadcast root %d outside [0, %d)", P, P))
		if !errors.Is(err, dist.ErrInvalid) {
			t.Errorf("error %v is not dist.ErrInvalid", err)
		}
		err = c.AllReduce(make([]float32, 10), dist.Sum)
		disttest.WantPeerError(t, me, err, bad, "during allreduce")
		if s := c.Stats(); s.Broadcast.Failed != 1 || s.AllReduce.Failed != 1 {
			t.Errorf("failures counted: broadcast %d, allreduce %d, want 1 each", s.Broadcast.Failed, s.AllReduce.Failed)
		}
	})

	t.Run("Close", func(t *testing.T) {
		closeSharedMPI(t)
		if err := c.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if err := c.Barrier(); !errors.Is(err, dist.ErrClosed) {
			t.Errorf("barrier after Close: %v, want dist.ErrClosed", err)
		}
		if _, err := c.AllGatherVAsync([]byte{1}).Wait(); !errors.Is(err, dist.ErrClosed) {
			t.Errorf("allgatherv after Close: %v, want dist.ErrClosed", err)
		}
		if _, err := New(); err == nil || !strings.Contains(err.Error(), "finalised") {
			t.Errorf("New after Close: %v, want an error saying MPI was finalised", err)
		}
	})
}

// TestMPIScenario runs one failure scenario, chosen with -mpi.scenario, in a job of its
// own: each leaves MPI finalised.
func TestMPIScenario(t *testing.T) {
	if *mpiScenario == "" {
		t.Skip("no -mpi.scenario")
	}
	c := sharedMPI(t)
	defer closeSharedMPI(t)
	P, me := c.Size(), c.Rank()
	switch *mpiScenario {
	case "mismatch":
		// Rank 0 reduces 10 floats, the others 11: the majority names rank 0, and with
		// two ranks (a tie) rank 1 is named. Every rank fails, and so does the next
		// collective.
		n := 11
		if me == 0 {
			n = 10
		}
		err := c.AllReduce(make([]float32, n), dist.Sum)
		if P == 1 {
			if err != nil {
				t.Errorf("allreduce alone: %v", err)
			}
			return
		}
		culprit := 0
		if P == 2 {
			culprit = 1
		}
		t.Logf("rank %d: %v", me, err)
		disttest.WantPeerError(t, me, err, culprit, "mismatched collective")
		if !errors.Is(err, dist.ErrMismatch) {
			t.Errorf("error %v is not dist.ErrMismatch", err)
		}
		disttest.WantPeerError(t, me, c.Barrier(), culprit, "during barrier")

	case "peerclosed":
		// The last rank closes; the others' next collective fails, naming it, instead
		// of waiting for ever.
		if P == 1 {
			t.Skip("needs two ranks")
		}
		if err := c.Barrier(); err != nil {
			t.Fatalf("barrier: %v", err)
		}
		last := P - 1
		if me == last {
			return // the deferred Close
		}
		err := c.AllReduce(make([]float32, 100), dist.Sum)
		t.Logf("rank %d: %v", me, err)
		disttest.WantPeerError(t, me, err, last, "closed its communicator during allreduce")
		if !errors.Is(err, dist.ErrPeerClosed) {
			t.Errorf("error %v is not dist.ErrPeerClosed", err)
		}

	default:
		t.Fatalf("unknown scenario %q", *mpiScenario)
	}
}

// TestMPIAgree checks the verdicts on descriptors, which every rank draws alike.
func TestMPIAgree(t *testing.T) {
	ar := func(n int) mpiDesc { return newDesc(engine.CollAllReduce, dist.Sum, n, 0, 3) }
	bc := func(n, root int) mpiDesc { return newDesc(engine.CollBroadcast, 0, n, root, 3) }
	ag := func(n int) mpiDesc { return newDesc(engine.CollAllGatherV, 0, n, 0, 3) }
	a2a := func(n int) mpiDesc { return newDesc(engine.CollAllToAllV, 0, n, 0, 3) }
	bar := newDesc(engine.CollBarrier, 0, 0, 0, 3)
	for _, tc := range []struct {
		name    string
		descs   []mpiDesc
		culprit int // -1: no fault
		cause   error
		text    string
	}{
		{"same allreduce", []mpiDesc{ar(5), ar(5), ar(5)}, -1, nil, ""},
		{"allgatherv sizes differ", []mpiDesc{ag(0), ag(7), ag(1 << 20)}, -1, nil, ""},
		{"barrier", []mpiDesc{bar, bar, bar}, -1, nil, ""},
		{"length on rank 1", []mpiDesc{ar(5), ar(6), ar(5)}, 1, dist.ErrMismatch,
			"issued allreduce (sum) of 6 floats where rank 0 issued allreduce (sum) of 5 floats"},
		{"rank 0 alone", []mpiDesc{ar(5), ar(6), ar(6)}, 0, dist.ErrMismatch, "where rank 1 issued"},
		{"tie of two", []mpiDesc{ar(5), ar(6)}, 1, dist.ErrMismatch, "where rank 0 issued"},
		{"op", []mpiDesc{ar(5), newDesc(engine.CollAllReduce, dist.Average, 5, 0, 3), ar(5)}, 1, dist.ErrMismatch, "(average)"},
		{"kind", []mpiDesc{bar, bar, ag(0)}, 2, dist.ErrMismatch, "issued allgatherv where rank 0 issued barrier"},
		{"root", []mpiDesc{bc(9, 0), bc(9, 0), bc(9, 1)}, 2, dist.ErrMismatch, "from root 1"},
		{"bad root", []mpiDesc{bc(9, 0), bc(9, 0), bc(9, -1)}, 2, dist.ErrInvalid, "broadcast root -1 outside [0, 3)"},
		{"bad op first", []mpiDesc{ar(5), newDesc(engine.CollAllReduce, dist.Op(9), 5, 0, 3), bc(1, 7)}, 1, dist.ErrInvalid,
			"allreduce op Op(9) is neither dist.Sum nor dist.Average"},
		{"alltoallv sizes differ", []mpiDesc{a2a(0), a2a(9), a2a(1 << 20)}, -1, nil, ""},
		{"alltoallv blocks", []mpiDesc{a2a(1), {code: int64(engine.CollAllToAllV), root: 4, invalid: int64(invalidBlocks)}, a2a(1)}, 1, dist.ErrInvalid,
			"alltoallv with 4 blocks for 3 ranks"},
		{"alltoallv kind", []mpiDesc{a2a(1), ag(1), a2a(1)}, 1, dist.ErrMismatch, "issued allgatherv where rank 0 issued alltoallv"},
		{"sendrecv peers", []mpiDesc{a2a(1), {code: int64(engine.CollSendRecv), root: 5, length: 0, invalid: int64(invalidPeers)}, a2a(1)}, 1, dist.ErrInvalid,
			"sendrecv to rank 5 from rank 0"},
		{"too long", []mpiDesc{ag(1), ag(maxCount + 1), ag(1)}, 1, dist.ErrInvalid, "exceeds the MPI count limit"},
		{"total too long", []mpiDesc{ag(maxCount / 2), ag(maxCount / 2), ag(2)}, 2, dist.ErrInvalid,
			"rank 2's 2 bytes bring the total over"},
	} {
		f := agree(0, tc.descs)
		switch {
		case tc.culprit < 0 && f != nil:
			t.Errorf("%s: fault %+v, want none", tc.name, f)
		case tc.culprit < 0:
		case f == nil:
			t.Errorf("%s: no fault, want one naming rank %d", tc.name, tc.culprit)
		case f.Rank != tc.culprit || !errors.Is(f.Cause, tc.cause) || !strings.Contains(f.Cause.Error(), tc.text):
			t.Errorf("%s: fault naming rank %d: %v; want rank %d, %v, %q", tc.name, f.Rank, f.Cause, tc.culprit, tc.cause, tc.text)
		}
	}
}

func TestMPIStagingPool(t *testing.T) {
	var p stagingPool
	a := p.get(100)
	if len(a) != 100 {
		t.Fatalf("len %d, want 100", len(a))
	}
	p.put(a)
	if b := p.get(60); &b[0] != &a[0] || len(b) != 60 {
		t.Errorf("a smaller request did not reuse the free buffer")
	}
	for i := range maxStaging + 2 {
		p.put(make([]float32, 10+i))
	}
	if len(p.free) != maxStaging {
		t.Errorf("%d buffers kept, want %d", len(p.free), maxStaging)
	}
	for _, f := range p.free {
		if cap(f) < 12 {
			t.Errorf("kept a buffer of %d while dropping larger ones", cap(f))
		}
	}
}

// BenchmarkMPI times a 100 MB allreduce of this backend (MPI_Iallreduce driven by the
// progress thread) and, as the yardstick, Open MPI's blocking MPI_Allreduce, run the
// same way. Under mpirun, give a fixed iteration count (-test.benchtime=10x) so that
// every rank runs the same number of collectives:
//
//	mpirun --allow-run-as-root -np 2 /tmp/dist_mpi.test -test.run '^$' -test.bench MPI -test.benchtime 10x
//
// On virtual machines that hand freed memory back to the host, MPI_Allreduce pays page
// faults for the scratch buffer Open MPI allocates on every call, which can cost more
// than the allreduce itself; MALLOC_MMAP_MAX_=0 (mpirun -x) makes glibc keep that
// memory. The backend's own allreduce reuses its staging buffer.
func BenchmarkMPI(b *testing.B) {
	c := sharedMPI(b)
	defer closeSharedMPI(b)
	if bt := flag.Lookup("test.benchtime"); c.Size() > 1 && (bt == nil || !strings.HasSuffix(bt.Value.String(), "x")) {
		b.Skip("under mpirun, pass -test.benchtime=Nx: every rank must run the same number of iterations")
	}
	mc := c.(*mpiComm)
	const size = 100 << 20
	P := c.Size()
	for _, v := range []struct {
		name string
		fn   func([]float32) error
	}{
		{"AllReduce/100MB", func(buf []float32) error { return c.AllReduce(buf, dist.Sum) }},
		{"MPI_Allreduce/100MB", mc.blockingAllReduce},
	} {
		b.Run(v.name, func(b *testing.B) {
			buf := make([]float32, size/4)
			// Warm up: page in the buffers, fill the staging pool.
			if err := v.fn(buf); err != nil {
				b.Fatal(err)
			}
			if err := c.Barrier(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if err := v.fn(buf); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			sec := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(sec*1e3, "ms")
			b.ReportMetric(float64(size)*2*float64(P-1)/float64(P)/sec/1e9, "busGB/s")
		})
	}
}
