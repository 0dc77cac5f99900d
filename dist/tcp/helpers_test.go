package tcp

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/dist/internal/disttest"
	"github.com/ssfusion/ssfusion/dist/internal/engine"
)

// backend starts a job of size ranks inside the test process.
type backend struct {
	name  string
	start func(t testing.TB, size int, opts ...dist.Option) []dist.Communicator
}

var backends = []backend{
	{"inproc", startInProc},
	{"tcp", startTCP},
}

func startInProc(t testing.TB, size int, opts ...dist.Option) []dist.Communicator {
	t.Helper()
	comms := inproc.New(size, append([]dist.Option{dist.WithLogger(disttest.QuietLog())}, opts...)...)
	t.Cleanup(func() { disttest.CloseAll(comms) })
	return comms
}

// startTCP forms a TCP job on loopback; rank 0 gets a listener on an ephemeral port.
func startTCP(t testing.TB, size int, opts ...dist.Option) []dist.Communicator {
	t.Helper()
	engines := dialTCPJob(t, size, Config{Logger: disttest.QuietLog()}, opts...)
	comms := make([]dist.Communicator, size)
	for r, e := range engines {
		comms[r] = e
	}
	t.Cleanup(func() { disttest.CloseAll(comms) })
	return comms
}

// dialTCPJob runs Dial for every rank of a loopback job based on tmpl.
func dialTCPJob(t testing.TB, size int, tmpl Config, opts ...dist.Option) []*engine.Engine {
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
	engines := make([]*engine.Engine, size)
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
			engines[r], errs[r] = dial(context.Background(), cfg, opts)
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
