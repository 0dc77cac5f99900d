// Package disttest holds what the transports' tests share: jobs' ranks run side by side
// with a time limit, checks that a transport's collectives match a reference computed
// here, and checks of the errors a failure must produce.
package disttest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/ssfusion/ssfusion/dist"
)

// QuietLog keeps expected failure reports out of the test output.
func QuietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func SlogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// CapturedLog collects log lines for assertions.
type CapturedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *CapturedLog) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *CapturedLog) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func CloseAll(comms []dist.Communicator) {
	var wg sync.WaitGroup
	for _, c := range comms {
		if c != nil {
			wg.Add(1)
			go func() { defer wg.Done(); c.Close() }()
		}
	}
	wg.Wait()
}

// RunRanks runs fn on every rank concurrently and returns each rank's error. A rank that
// has not returned within limit fails the test instead of hanging it.
func RunRanks(t testing.TB, comms []dist.Communicator, limit time.Duration, fn func(r int, c dist.Communicator) error) []error {
	t.Helper()
	errs := make([]error, len(comms))
	done := make(chan int, len(comms))
	for r, c := range comms {
		go func() {
			defer func() { done <- r }()
			errs[r] = fn(r, c)
		}()
	}
	timeout := time.After(limit)
	finished := make([]bool, len(comms))
	for range comms {
		select {
		case r := <-done:
			finished[r] = true
		case <-timeout:
			var stuck []int
			for r, f := range finished {
				if !f {
					stuck = append(stuck, r)
				}
			}
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("ranks %v still running after %v (hang)\n%s", stuck, limit, buf)
		}
	}
	return errs
}

func NoErrors(t testing.TB, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// CheckGoroutines fails the test if goroutines started during it are still running when
// it ends (after the cleanups registered later, which run first).
func CheckGoroutines(t *testing.T) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > base {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutines leaked: %d running, %d before the test\n%s", runtime.NumGoroutine(), base, buf)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// WantPeerError checks that err is a *dist.PeerError naming rank culprit.
func WantPeerError(t testing.TB, who int, err error, culprit int, substr string) {
	t.Helper()
	if err == nil {
		t.Errorf("rank %d: no error, want one naming rank %d", who, culprit)
		return
	}
	pe, ok := err.(*dist.PeerError)
	if !ok {
		t.Errorf("rank %d: error %T %q, want *dist.PeerError naming rank %d", who, err, err, culprit)
		return
	}
	if pe.Rank != culprit {
		t.Errorf("rank %d: error names rank %d, want %d: %v", who, pe.Rank, culprit, err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("rank %d:", culprit)) {
		t.Errorf("rank %d: message %q does not name rank %d", who, err, culprit)
	}
	if substr != "" && !strings.Contains(err.Error(), substr) {
		t.Errorf("rank %d: message %q does not contain %q", who, err, substr)
	}
}

// IntData is exactly summable: integers small enough that every order of additions gives
// the same float32, so results compare exactly with the sequential reference.
func IntData(r, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(((r+1)*(i+3))%17 - 8)
	}
	return x
}

// RandData is not: its sums depend on the order, which is what the bit-identity check
// across ranks is about.
func RandData(r, n int) []float32 {
	rng := rand.New(rand.NewPCG(uint64(r), uint64(n)))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(7)-3)))
	}
	return x
}

func GatherData(r, n int) []byte {
	if r%3 == 2 {
		return nil // some ranks send nothing
	}
	b := make([]byte, n+r*7)
	for i := range b {
		b[i] = byte(r*31 + i)
	}
	return b
}

func CheckAllReduce(t *testing.T, comms []dist.Communicator, n int) {
	t.Helper()
	P := len(comms)
	for _, op := range []dist.Op{dist.Sum, dist.Average} {
		// Exact data against the sequential reference.
		want := make([]float32, n)
		for r := range P {
			for i, x := range IntData(r, n) {
				want[i] += x
			}
		}
		if op == dist.Average {
			for i := range want {
				want[i] /= float32(P)
			}
		}
		got := make([][]float32, P)
		NoErrors(t, RunRanks(t, comms, 30*time.Second, func(r int, c dist.Communicator) error {
			got[r] = IntData(r, n)
			return c.AllReduce(got[r], op)
		}))
		for r := range P {
			if i := FirstDiff(got[r], want); i >= 0 {
				t.Fatalf("allreduce %v n=%d rank %d: element %d = %v, want %v", op, n, r, i, got[r][i], want[i])
			}
		}

		// Order-sensitive data: close to the reference, and the same bits everywhere.
		ref := make([]float64, n)
		mag := make([]float64, n)
		for r := range P {
			for i, x := range RandData(r, n) {
				ref[i] += float64(x)
				mag[i] += math.Abs(float64(x))
			}
		}
		NoErrors(t, RunRanks(t, comms, 30*time.Second, func(r int, c dist.Communicator) error {
			got[r] = RandData(r, n)
			return c.AllReduce(got[r], op)
		}))
		for i := range n {
			w := ref[i]
			if op == dist.Average {
				w /= float64(P)
				mag[i] /= float64(P)
			}
			if d := math.Abs(float64(got[0][i]) - w); d > 1e-6*mag[i]*float64(P) {
				t.Fatalf("allreduce %v n=%d: element %d = %v, want %v", op, n, i, got[0][i], w)
			}
		}
		for r := 1; r < P; r++ {
			if i := FirstBitDiff(got[r], got[0]); i >= 0 {
				t.Fatalf("allreduce %v n=%d: rank %d element %d is %08x, rank 0 has %08x: not bit-identical",
					op, n, r, i, math.Float32bits(got[r][i]), math.Float32bits(got[0][i]))
			}
		}
	}
}

func CheckAllGather(t *testing.T, comms []dist.Communicator, n int) {
	t.Helper()
	P := len(comms)
	got := make([][][]byte, P)
	gotF := make([][][]float32, P)
	gotI := make([][][]int32, P)
	NoErrors(t, RunRanks(t, comms, 30*time.Second, func(r int, c dist.Communicator) error {
		var err error
		if got[r], err = c.AllGatherV(GatherData(r, n)); err != nil {
			return err
		}
		if gotF[r], err = dist.AllGatherFloat32(c, IntData(r, n/4+r)); err != nil {
			return err
		}
		ints := make([]int32, n%7+r)
		for i := range ints {
			ints[i] = int32(r*1000 - i)
		}
		gotI[r], err = dist.AllGatherInt32(c, ints)
		return err
	}))
	for r := range P {
		if len(got[r]) != P || len(gotF[r]) != P || len(gotI[r]) != P {
			t.Fatalf("allgatherv n=%d rank %d: %d/%d/%d parts, want %d", n, r, len(got[r]), len(gotF[r]), len(gotI[r]), P)
		}
		for q := range P {
			if want := GatherData(q, n); !bytes.Equal(got[r][q], want) || got[r][q] == nil {
				t.Fatalf("allgatherv n=%d rank %d: part %d has %d bytes, want %d", n, r, q, len(got[r][q]), len(want))
			}
			if want := IntData(q, n/4+q); !slices.Equal(gotF[r][q], want) {
				t.Fatalf("allgather float32 n=%d rank %d: part %d differs", n, r, q)
			}
			if len(gotI[r][q]) != n%7+q || (len(gotI[r][q]) > 0 && gotI[r][q][0] != int32(q*1000)) {
				t.Fatalf("allgather int32 n=%d rank %d: part %d = %v", n, r, q, gotI[r][q])
			}
		}
	}
}

func CheckBroadcast(t *testing.T, comms []dist.Communicator, n int) {
	t.Helper()
	P := len(comms)
	for root := range P {
		want := GatherData(0, n)
		for i := range want {
			want[i] ^= byte(root)
		}
		got := make([][]byte, P)
		gotF := make([][]float32, P)
		NoErrors(t, RunRanks(t, comms, 30*time.Second, func(r int, c dist.Communicator) error {
			got[r] = make([]byte, len(want))
			gotF[r] = make([]float32, n/4)
			if r == root {
				copy(got[r], want)
				gotF[r] = IntData(root, n/4)
			}
			if err := c.Broadcast(got[r], root); err != nil {
				return err
			}
			return dist.BroadcastFloat32(c, gotF[r], root)
		}))
		for r := range P {
			if !bytes.Equal(got[r], want) {
				t.Fatalf("broadcast n=%d root %d: rank %d differs", n, root, r)
			}
			if !slices.Equal(gotF[r], IntData(root, n/4)) {
				t.Fatalf("broadcast float32 n=%d root %d: rank %d differs", n, root, r)
			}
		}
	}
}

func FirstDiff(a, b []float32) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func FirstBitDiff(a, b []float32) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// ExchangeData is the block rank from sends rank to in an alltoallv test: lengths differ
// by pair, and some pairs send nothing.
func ExchangeData(from, to, n int) []byte {
	if (from+2*to)%4 == 3 {
		return nil
	}
	b := make([]byte, n+from*5+to*3)
	for i := range b {
		b[i] = byte(from*31 + to*7 + i)
	}
	return b
}

// CheckAllToAll runs one alltoallv of blocks about n bytes long, and one issued
// asynchronously between two allreduces, and compares what every rank received with what
// was addressed to it.
func CheckAllToAll(t *testing.T, comms []dist.Communicator, n int) {
	t.Helper()
	P := len(comms)
	blocks := func(r int) [][]byte {
		send := make([][]byte, P)
		for q := range send {
			send[q] = ExchangeData(r, q, n)
		}
		return send
	}
	got := make([][][]byte, P)
	gotAsync := make([][][]byte, P)
	NoErrors(t, RunRanks(t, comms, 30*time.Second, func(r int, c dist.Communicator) error {
		var err error
		if got[r], err = c.AllToAllV(blocks(r)); err != nil {
			return err
		}
		first := c.AllReduceAsync(IntData(r, 100), dist.Sum)
		h := c.AllToAllVAsync(blocks(r))
		last := c.AllReduceAsync(IntData(r, 50), dist.Sum)
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
				if want := ExchangeData(q, r, n); !bytes.Equal(out[q], want) || out[q] == nil {
					t.Fatalf("%s n=%d rank %d: block from rank %d has %d bytes, want %d", name, n, r, q, len(out[q]), len(want))
				}
				if q+1 < P && len(out[q]) > 0 && cap(out[q]) != len(out[q]) {
					t.Fatalf("%s n=%d rank %d: block from rank %d has room to grow into the next", name, n, r, q)
				}
			}
		}
	}
}

// CheckSendRecv runs a sendrecv for every shift of the ranks, the self exchange included,
// and compares what each rank received with what its from sent.
func CheckSendRecv(t *testing.T, comms []dist.Communicator, n int) {
	t.Helper()
	P := len(comms)
	got := make([][][]byte, P)
	NoErrors(t, RunRanks(t, comms, 30*time.Second, func(r int, c dist.Communicator) error {
		for gap := range P {
			out, err := c.SendRecv(ExchangeData(r, (r+gap)%P, n), (r+gap)%P, (r-gap+P)%P)
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
			if want := ExchangeData(from, r, n); !bytes.Equal(out, want) || out == nil {
				t.Fatalf("sendrecv n=%d, shift %d: rank %d got %d bytes from rank %d, want %d", n, gap, r, len(out), from, len(want))
			}
		}
	}
}

// CheckGatherer checks a Gatherer's results against every rank's data through a sequence
// of sizes that differ between ranks (single-step and many-step gathers on shared
// memory), that the kept buffer is reused when it is large enough if reuses, and a last
// call in which every rank sends the next rank's block of the previous result, so that
// the blocks move within the kept buffer.
func CheckGatherer(t *testing.T, comms []dist.Communicator, reuses bool) {
	t.Helper()
	NoErrors(t, RunRanks(t, comms, 20*time.Second, func(r int, c dist.Communicator) error {
		g := dist.NewGatherer(c)
		var got [][]byte
		check := func(call string, want [][]byte) error {
			for q := range want {
				if !bytes.Equal(got[q], want[q]) {
					return fmt.Errorf("%s: block %d differs", call, q)
				}
				if cap(got[q]) != len(got[q]) {
					return fmt.Errorf("%s: block %d has capacity %d beyond its %d bytes", call, q, cap(got[q]), len(got[q]))
				}
			}
			return nil
		}
		var first *byte
		size := func(base, q int) int { return base + min(base, 37*q) }
		for i, n := range []int{1000, 5, 0, 700} {
			var err error
			if got, err = g.AllGatherV(GatherData(r+i, size(n, r))); err != nil {
				return err
			}
			want := make([][]byte, len(comms))
			for q := range want {
				want[q] = GatherData(q+i, size(n, q))
			}
			if err := check(fmt.Sprintf("call %d, %d bytes", i, n), want); err != nil {
				return err
			}
			if i == 0 {
				first = unsafe.SliceData(got[0])
			} else if reuses && n > 0 && unsafe.SliceData(got[0]) != first {
				return fmt.Errorf("call %d, %d bytes: not gathered into the kept buffer", i, n)
			}
		}
		next := func(q int) int { return (q + 1) % len(got) }
		want := make([][]byte, len(got))
		for q := range got {
			want[q] = slices.Clone(got[next(q)])
		}
		var err error
		if got, err = g.AllGatherV(got[next(r)]); err != nil {
			return err
		}
		if err := check("send from the last result", want); err != nil {
			return err
		}
		return checkGathererExchange(g, r, len(comms), reuses, check, &got)
	}))
}

// checkGathererExchange is CheckGatherer's part for AllToAllV: blocks of several sizes
// (empty ones among them), received into the kept buffer when reuses is set, and blocks
// sent from the last call's result.
func checkGathererExchange(g *dist.Gatherer, r, P int, reuses bool, check func(string, [][]byte) error, got *[][]byte) error {
	var lo, hi uintptr // the memory call 0's blocks occupied
	for i, n := range []int{1000, 5, 0, 700} {
		send := make([][]byte, P)
		for q := range send {
			send[q] = ExchangeData(r+i, q, n)
		}
		var err error
		if *got, err = g.AllToAllV(send); err != nil {
			return err
		}
		want := make([][]byte, P)
		for q := range want {
			want[q] = ExchangeData(q+i, r, n)
		}
		call := fmt.Sprintf("exchange %d, %d bytes", i, n)
		if err := check(call, want); err != nil {
			return err
		}
		for q, b := range *got {
			p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
			switch {
			case i == 0 && q == 0:
				lo, hi = p, p
			case i == 0:
				hi = max(hi, p+uintptr(len(b)))
			case reuses && len(b) > 0 && (p < lo || p+uintptr(len(b)) > hi):
				return fmt.Errorf("%s: block %d not received into the kept buffer", call, q)
			}
		}
	}
	// Rank r now holds from rank q what q sent it in call 3; it sends to rank q what it
	// received from rank q+1.
	next := func(q int) int { return (q + 1) % P }
	send := make([][]byte, P)
	for q := range send {
		send[q] = (*got)[next(q)]
	}
	var err error
	if *got, err = g.AllToAllV(send); err != nil {
		return err
	}
	want := make([][]byte, P)
	for q := range want {
		want[q] = ExchangeData(next(r)+3, q, 700)
	}
	return check("exchange sent from the last result", want)
}

// Signaled returns the signal that ended a child process, or nil.
func Signaled(err error) os.Signal {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ws.Signal()
		}
	}
	return nil
}

// SendRecvMisuse are the ways ranks can call a sendrecv wrongly, and what every rank's
// error must then be.
var SendRecvMisuse = []struct {
	Name    string
	To      func(r int) (to, from int)
	Want    error
	Culprit int // -1: any
	Text    string
}{
	{"out of range", func(r int) (int, int) {
		if r == 1 {
			return 3, 0
		}
		return (r + 1) % 3, (r + 2) % 3
	}, dist.ErrInvalid, 1, "sendrecv to rank 3 from rank 0"},
	{"self and other", func(r int) (int, int) {
		if r == 2 {
			return 2, 1
		}
		return (r + 1) % 3, (r + 2) % 3
	}, dist.ErrInvalid, 2, "to itself"},
	{"peers that do not pair up", func(r int) (int, int) {
		if r == 2 {
			return 1, 1 // rank 1 receives from 0
		}
		return (r + 1) % 3, (r + 2) % 3
	}, dist.ErrMismatch, -1, ""},
}

// Misuse runs a sendrecv and, if this rank got its data before the others found the
// fault (a rank learns of a failure when it next needs data), the barrier after it.
func Misuse(c dist.Communicator, to, from int) error {
	if _, err := c.SendRecv([]byte{byte(c.Rank())}, to, from); err != nil {
		return err
	}
	return c.Barrier()
}

func CheckMisuse(t *testing.T, errs []error, want error, culprit int, text string) {
	t.Helper()
	for r, err := range errs {
		if culprit >= 0 {
			WantPeerError(t, r, err, culprit, text)
		}
		if !errors.Is(err, want) {
			t.Errorf("rank %d: %v, want %v", r, err, want)
		}
	}
}

var BenchSizes = []int{1 << 10, 64 << 10, 1 << 20, 16 << 20, 100 << 20}

func SizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// BenchRanks runs fn(r, c) b.N times on every rank concurrently.
func BenchRanks(b *testing.B, comms []dist.Communicator, fn func(r int, c dist.Communicator) error) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(comms))
	b.ResetTimer()
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range b.N {
				if err := fn(r, c); err != nil {
					errs[r] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	for r, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
}

func ReportBus(b *testing.B, bytesPerLink float64) {
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(sec*1e3, "ms")
	b.ReportMetric(bytesPerLink/sec/1e9, "busGB/s")
}

// BenchAllReduce times summing size bytes of float32 on every rank of comms.
func BenchAllReduce(b *testing.B, comms []dist.Communicator, size int) {
	P := len(comms)
	bufs := make([][]float32, P)
	for r := range bufs {
		bufs[r] = make([]float32, size/4)
	}
	BenchRanks(b, comms, func(r int, c dist.Communicator) error { return c.AllReduce(bufs[r], dist.Sum) })
	ReportBus(b, float64(size)*2*float64(P-1)/float64(P))
}

// BenchAllGatherV times gathering size bytes in all, each rank of comms sending its share.
func BenchAllGatherV(b *testing.B, comms []dist.Communicator, size int) {
	P := len(comms)
	send := make([][]byte, P)
	for r := range send {
		send[r] = make([]byte, size/P)
	}
	BenchRanks(b, comms, func(r int, c dist.Communicator) error {
		_, err := c.AllGatherV(send[r])
		return err
	})
	ReportBus(b, float64(size)*float64(P-1)/float64(P))
}

// TCPMesh returns conns[i][j], the end at rank i of a loopback TCP connection between
// ranks i and j, for tests that run an engine over real sockets without a rendezvous.
func TCPMesh(t testing.TB, P int) [][]net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conns := make([][]net.Conn, P)
	for i := range conns {
		conns[i] = make([]net.Conn, P)
	}
	for i := range P {
		for j := i + 1; j < P; j++ {
			if conns[i][j], err = net.Dial("tcp", ln.Addr().String()); err != nil {
				t.Fatal(err)
			}
			if conns[j][i], err = ln.Accept(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return conns
}
