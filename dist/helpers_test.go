package dist

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// backend starts a job of size ranks inside the test process.
type backend struct {
	name  string
	start func(t testing.TB, size int, opts ...Option) []Communicator
}

var backends = []backend{
	{"inproc", startInProc},
	{"tcp", startTCP},
}

// quietLog keeps expected failure reports out of the test output.
func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// capturedLog collects log lines for assertions.
type capturedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *capturedLog) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *capturedLog) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func startInProc(t testing.TB, size int, opts ...Option) []Communicator {
	t.Helper()
	comms := NewInProc(size, append([]Option{WithLogger(quietLog())}, opts...)...)
	t.Cleanup(func() { closeAll(comms) })
	return comms
}

func closeAll(comms []Communicator) {
	var wg sync.WaitGroup
	for _, c := range comms {
		if c != nil {
			wg.Add(1)
			go func() { defer wg.Done(); c.Close() }()
		}
	}
	wg.Wait()
}

// startTCP forms a TCP job on loopback; rank 0 gets a listener on an ephemeral port.
func startTCP(t testing.TB, size int, opts ...Option) []Communicator {
	t.Helper()
	engines := dialTCPJob(t, size, TCPConfig{Logger: quietLog()}, opts...)
	comms := make([]Communicator, size)
	for r, e := range engines {
		comms[r] = e
	}
	t.Cleanup(func() { closeAll(comms) })
	return comms
}

// dialTCPJob runs DialTCP for every rank of a loopback job based on tmpl.
func dialTCPJob(t testing.TB, size int, tmpl TCPConfig, opts ...Option) []*engine {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.Token == "" {
		tmpl.Token = NewJobToken()
	}
	if tmpl.DialTimeout == 0 {
		tmpl.DialTimeout = 20 * time.Second
	}
	tmpl.MasterAddr = ln.Addr().String()
	tmpl.Size = size
	engines := make([]*engine, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r := range size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := tmpl
			cfg.Rank = r
			if r == 0 {
				cfg.Listener = ln
			}
			engines[r], errs[r] = dialTCP(context.Background(), cfg, opts)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			for _, e := range engines {
				if e != nil {
					e.Close()
				}
			}
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return engines
}

// runRanks runs fn on every rank concurrently and returns each rank's error. A rank that
// has not returned within limit fails the test instead of hanging it.
func runRanks(t testing.TB, comms []Communicator, limit time.Duration, fn func(r int, c Communicator) error) []error {
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

func noErrors(t testing.TB, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// checkGoroutines fails the test if goroutines started during it are still running when
// it ends (after the cleanups registered later, which run first).
func checkGoroutines(t *testing.T) {
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

// wantPeerError checks that err is a *PeerError naming rank culprit.
func wantPeerError(t testing.TB, who int, err error, culprit int, substr string) {
	t.Helper()
	if err == nil {
		t.Errorf("rank %d: no error, want one naming rank %d", who, culprit)
		return
	}
	pe, ok := err.(*PeerError)
	if !ok {
		t.Errorf("rank %d: error %T %q, want *PeerError naming rank %d", who, err, err, culprit)
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
