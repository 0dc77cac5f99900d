//go:build linux

package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/disttest"
	"github.com/ssfusion/ssfusion/dist/internal/engine"
	"github.com/ssfusion/ssfusion/dist/shm"
)

// TestShmWrongToken: a process without the job token is refused before it can learn
// where the segment is, and the job goes on to shared memory without it.
func TestShmWrongToken(t *testing.T) {
	disttest.CheckGoroutines(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tmpl := Config{Size: 2, MasterAddr: ln.Addr().String(), Token: NewJobToken(), DialTimeout: 10 * time.Second, Logger: disttest.QuietLog()}
	engines := make([]*engine.Engine, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cfg := tmpl
		cfg.Listener = ln
		engines[0], errs[0] = dial(context.Background(), cfg, nil)
	}()

	impostor := tmpl
	impostor.Rank, impostor.Token = 1, "guess"
	if c, err := Dial(context.Background(), impostor); !errors.Is(err, dist.ErrRejected) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("wrong token: %v, want dist.ErrRejected", err)
	}

	wg.Add(1)
	go func() {
		defer wg.Done()
		cfg := tmpl
		cfg.Rank = 1
		engines[1], errs[1] = dial(context.Background(), cfg, nil)
	}()
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	comms := make([]dist.Communicator, len(engines))
	var upgrades sync.WaitGroup
	for r, e := range engines {
		upgrades.Go(func() { comms[r], errs[r] = shm.Upgrade(e) })
	}
	upgrades.Wait()
	t.Cleanup(func() { disttest.CloseAll(comms) })
	for r, c := range comms {
		if _, onTCP := c.(*engine.Engine); onTCP || errs[r] != nil {
			t.Fatalf("rank %d: %T, %v; want the shared memory communicator", r, c, errs[r])
		}
	}
	disttest.NoErrors(t, disttest.RunRanks(t, comms, 10*time.Second, func(r int, c dist.Communicator) error {
		buf := []float32{float32(r + 1)}
		if err := c.AllReduce(buf, dist.Sum); err != nil {
			return err
		}
		if buf[0] != 3 {
			return fmt.Errorf("sum %v, want 3", buf[0])
		}
		return nil
	}))
}
