//go:build linux

package shm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/disttest"
	"github.com/ssfusion/ssfusion/dist/internal/engine"
	"github.com/ssfusion/ssfusion/dist/internal/wire"
)

// startShm forms a loopback TCP job and moves it onto shared memory the way Dial
// does, every rank a goroutine of this process with a mapping of its own. It fails the
// test if a rank stays on TCP.
func startShm(t testing.TB, size int, opts ...dist.Option) []dist.Communicator {
	t.Helper()
	return startShmWith(t, geometry{defaultChunk, defaultSmall}, size, opts...)
}

// startShmWith is startShm with the slot and small-allreduce sizes of g.
func startShmWith(t testing.TB, g geometry, size int, opts ...dist.Option) []dist.Communicator {
	t.Helper()
	comms := upgradeAll(t, g, tcpEngines(t, size, opts...))
	for r, c := range comms {
		if _, ok := c.(*shmComm); !ok {
			disttest.CloseAll(comms)
			t.Fatalf("rank %d: %T, want the shared memory communicator", r, c)
		}
	}
	t.Cleanup(func() { disttest.CloseAll(comms) })
	return comms
}

// tcpEngines starts the engines of a job over loopback TCP connections, as a TCP job's
// are before they move to shared memory.
func tcpEngines(t testing.TB, size int, opts ...dist.Option) []*engine.Engine {
	t.Helper()
	o, err := dist.NewOptions(dist.Options{Logger: disttest.QuietLog()}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	conns := disttest.TCPMesh(t, size)
	engines := make([]*engine.Engine, size)
	for r := range size {
		engines[r] = engine.New(r, size, conns[r], o)
	}
	return engines
}

func upgradeAll(t testing.TB, g geometry, engines []*engine.Engine) []dist.Communicator {
	t.Helper()
	comms := make([]dist.Communicator, len(engines))
	errs := make([]error, len(engines))
	var wg sync.WaitGroup
	for r, e := range engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[r], errs[r] = upgrade(e, g)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return comms
}

func TestShmCollectivesMatchReference(t *testing.T) {
	disttest.CheckGoroutines(t)
	geometries := []struct {
		name         string
		chunk, small int
	}{
		{"default", defaultChunk, defaultSmall},
		{"tiny-slots", 256, 64},
		{"all-small", 1 << 20, 1 << 20},
	}
	for _, g := range geometries {
		for P := 2; P <= 5; P++ {
			t.Run(fmt.Sprintf("%s/P=%d", g.name, P), func(t *testing.T) {
				comms := startShmWith(t, geometry{g.chunk, g.small}, P)
				for _, n := range []int{0, 1, 3, 63, 1009, 40000 + 3} {
					disttest.CheckAllReduce(t, comms, n)
					disttest.CheckAllGather(t, comms, n)
					disttest.CheckBroadcast(t, comms, n)
				}
				disttest.NoErrors(t, disttest.RunRanks(t, comms, 20*time.Second, func(r int, c dist.Communicator) error { return c.Barrier() }))
			})
		}
	}
}

func TestShmCollectivesLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("large buffers")
	}
	disttest.CheckGoroutines(t)
	for _, P := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("P=%d", P), func(t *testing.T) {
			comms := startShm(t, P)
			mb := 3 << 20
			disttest.CheckAllReduce(t, comms, mb/4+17)
			disttest.CheckAllGather(t, comms, mb*2/3+5)
			disttest.CheckBroadcast(t, comms, mb+1)
		})
	}
}

// TestShmBackToBack runs many collectives of changing kinds and sizes without pause, so
// that fast ranks keep overwriting slots that slow ones have just read.
func TestShmBackToBack(t *testing.T) {
	disttest.CheckGoroutines(t)
	const P, rounds = 3, 1500
	comms := startShmWith(t, geometry{1024, 256}, P)
	disttest.NoErrors(t, disttest.RunRanks(t, comms, 60*time.Second, func(r int, c dist.Communicator) error {
		for i := range rounds {
			n := (i * 37) % 700
			buf := disttest.IntData(r, n)
			if err := c.AllReduce(buf, dist.Sum); err != nil {
				return err
			}
			want := make([]float32, n)
			for q := range P {
				wire.SumInto(want, want, disttest.IntData(q, n))
			}
			for j := range n {
				if buf[j] != want[j] {
					return fmt.Errorf("round %d: element %d of %d = %v, want %v", i, j, n, buf[j], want[j])
				}
			}
			parts, err := c.AllGatherV(disttest.GatherData(r, n))
			if err != nil {
				return err
			}
			for q, p := range parts {
				if string(p) != string(disttest.GatherData(q, n)) {
					return fmt.Errorf("round %d: allgatherv part %d differs", i, q)
				}
			}
		}
		return nil
	}))
}

// TestShmAllGatherOwnership checks that the blocks of an allgatherv, which share one
// allocation, are still the caller's to keep and grow one by one: appending to a block
// leaves the next intact, and this rank's block is a copy of send, in single and in
// many-step gathers.
func TestShmAllGatherOwnership(t *testing.T) {
	comms := startShmWith(t, geometry{256, 64}, 3)
	for _, n := range []int{5, 1000} {
		disttest.NoErrors(t, disttest.RunRanks(t, comms, 20*time.Second, func(r int, c dist.Communicator) error {
			send := disttest.GatherData(r, n)
			parts, err := c.AllGatherV(send)
			if err != nil {
				return err
			}
			for i := range send {
				send[i]++
			}
			for q, p := range parts {
				if cap(p) != len(p) {
					return fmt.Errorf("n=%d: block %d has capacity %d beyond its %d bytes", n, q, cap(p), len(p))
				}
				parts[q] = append(p, 0xff)
			}
			for q, p := range parts {
				if want := disttest.GatherData(q, n); string(p[:len(p)-1]) != string(want) {
					return fmt.Errorf("n=%d: block %d changed by the caller's writes elsewhere", n, q)
				}
			}
			return nil
		}))
	}
}

// TestShmGatherer checks a dist.Gatherer on shared memory, which gathers into its buffer.
func TestShmGatherer(t *testing.T) {
	disttest.CheckGatherer(t, startShmWith(t, geometry{256, 64}, 3), true)
}

// TestShmAsync issues collectives of every kind before waiting for any.
func TestShmAsync(t *testing.T) {
	disttest.CheckGoroutines(t)
	const P = 3
	comms := startShmWith(t, geometry{4096, 512}, P)
	sizes := []int{1, 1009, 40000, 0, 7}
	disttest.NoErrors(t, disttest.RunRanks(t, comms, 30*time.Second, func(r int, c dist.Communicator) error {
		bufs := make([][]float32, len(sizes))
		reduces := make([]dist.Handle, len(sizes))
		gathers := make([]dist.GatherHandle, len(sizes))
		for i, n := range sizes {
			bufs[i] = disttest.IntData(r, n)
			reduces[i] = c.AllReduceAsync(bufs[i], dist.Sum)
			gathers[i] = c.AllGatherVAsync(disttest.GatherData(r, n))
		}
		for i := len(sizes) - 1; i >= 0; i-- {
			parts, err := gathers[i].Wait()
			if err != nil {
				return err
			}
			for q := range P {
				if string(parts[q]) != string(disttest.GatherData(q, sizes[i])) {
					return fmt.Errorf("allgatherv %d: part %d differs", i, q)
				}
			}
			if err := reduces[i].Wait(); err != nil {
				return err
			}
			a, b, c := disttest.IntData(0, sizes[i]), disttest.IntData(1, sizes[i]), disttest.IntData(2, sizes[i])
			for j, x := range bufs[i] {
				if want := a[j] + b[j] + c[j]; x != want {
					return fmt.Errorf("allreduce %d: element %d = %v, want %v", i, j, x, want)
				}
			}
		}
		return nil
	}))
}

// TestShmKilledRank: a rank that crashes (its connections drop and it stops) in the
// middle of a pipelined allreduce, having written its part of a step but before
// announcing it, fails the others, naming it, and every later collective too.
func TestShmKilledRank(t *testing.T) {
	disttest.CheckGoroutines(t)
	const P, victim = 4, 2
	crash := dist.WithFaultHook(func(ev dist.FaultEvent) dist.FaultAction {
		return dist.CrashIf(ev.Rank == victim && ev.Point == dist.FaultShmStep && ev.Collective == "allreduce" && ev.Seq == 1 && ev.N == 2)
	})
	comms := startShm(t, P, dist.WithTimeout(time.Minute), crash)
	errs := disttest.RunRanks(t, comms, 15*time.Second, func(r int, c dist.Communicator) error {
		err := c.AllReduce(make([]float32, 1<<20), dist.Sum) // 5 steps of 1 MiB
		if r == victim {
			return nil // a crashed process reports nothing
		}
		return err
	})
	for r, err := range errs {
		if r == victim {
			continue
		}
		if err == nil {
			t.Fatalf("rank %d: allreduce succeeded without rank %d", r, victim)
		}
		disttest.WantPeerError(t, r, err, victim, "during allreduce #1")
		if !errors.Is(err, dist.ErrConnLost) {
			t.Errorf("rank %d: %v, want dist.ErrConnLost", r, err)
		}
		disttest.WantPeerError(t, r, comms[r].Barrier(), victim, "during barrier #2")
	}
}

// TestShmSilentRank: a rank that never issues the collective is blamed after the
// timeout, by name.
func TestShmSilentRank(t *testing.T) {
	disttest.CheckGoroutines(t)
	const P, silent = 3, 1
	timeout := 300 * time.Millisecond
	for _, n := range []int{10, 1 << 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			comms := startShm(t, P, dist.WithTimeout(timeout))
			errs := disttest.RunRanks(t, comms, 15*time.Second, func(r int, c dist.Communicator) error {
				if r == silent {
					return nil
				}
				return c.AllReduce(make([]float32, n), dist.Sum)
			})
			for r, err := range errs {
				if r == silent {
					continue
				}
				disttest.WantPeerError(t, r, err, silent, "during allreduce #1")
				if !errors.Is(err, dist.ErrTimeout) {
					t.Errorf("rank %d: %v, want dist.ErrTimeout", r, err)
				}
			}
			disttest.WantPeerError(t, silent, comms[silent].Barrier(), silent, "timed out")
		})
	}
}

// TestShmMismatch: different collectives under one number fail on every rank.
func TestShmMismatch(t *testing.T) {
	disttest.CheckGoroutines(t)
	cases := map[string]func(r int, c dist.Communicator) error{
		"sizes": func(r int, c dist.Communicator) error { return c.AllReduce(make([]float32, 10+200000*r), dist.Sum) },
		"ops":   func(r int, c dist.Communicator) error { return c.AllReduce(make([]float32, 10), dist.Op(r)) },
		"roots": func(r int, c dist.Communicator) error { return c.Broadcast(make([]byte, 40), r) },
		"kinds": func(r int, c dist.Communicator) error {
			if r == 0 {
				return c.Barrier()
			}
			_, err := c.AllGatherV(nil)
			return err
		},
	}
	for name, run := range cases {
		t.Run(name, func(t *testing.T) {
			comms := startShm(t, 2)
			errs := disttest.RunRanks(t, comms, 15*time.Second, run)
			for r, err := range errs {
				if !errors.Is(err, dist.ErrMismatch) {
					t.Errorf("rank %d: %v, want dist.ErrMismatch", r, err)
				}
				if err := comms[r].Barrier(); !errors.Is(err, dist.ErrMismatch) {
					t.Errorf("rank %d: next collective: %v, want dist.ErrMismatch", r, err)
				}
			}
		})
	}
}

// TestShmInvalidArgument: a bad argument on one rank fails every rank, naming it, with
// its message.
func TestShmInvalidArgument(t *testing.T) {
	disttest.CheckGoroutines(t)
	comms := startShm(t, 3)
	errs := disttest.RunRanks(t, comms, 15*time.Second, func(r int, c dist.Communicator) error {
		root := 0
		if r == 1 {
			root = 7
		}
		return c.Broadcast(make([]byte, 100), root)
	})
	for r, err := range errs {
		disttest.WantPeerError(t, r, err, 1, "root 7 outside [0, 3)")
		if !errors.Is(err, dist.ErrInvalid) {
			t.Errorf("rank %d: %v, want dist.ErrInvalid", r, err)
		}
	}
}

// TestShmPeerClosed: a collective that needs a rank that closed fails, naming it.
func TestShmPeerClosed(t *testing.T) {
	disttest.CheckGoroutines(t)
	comms := startShm(t, 3)
	if err := comms[2].Close(); err != nil {
		t.Fatal(err)
	}
	errs := disttest.RunRanks(t, comms[:2], 15*time.Second, func(r int, c dist.Communicator) error { return c.Barrier() })
	for r, err := range errs {
		disttest.WantPeerError(t, r, err, 2, "closed its communicator")
	}
	if err := comms[2].Barrier(); !errors.Is(err, dist.ErrClosed) {
		t.Errorf("closed rank: %v, want dist.ErrClosed", err)
	}
}

// TestShmSegmentPrivate: the segment is created for this user alone, vanishes from the
// file system once every rank has mapped it, and is refused when its magic or its mode
// is wrong.
func TestShmSegmentPrivate(t *testing.T) {
	before, _ := filepath.Glob(filepath.Join(shmDir, "ssfusion-*"))
	comms := startShm(t, 2)
	after, _ := filepath.Glob(filepath.Join(shmDir, "ssfusion-*"))
	for _, f := range after {
		if !contains(before, f) {
			t.Errorf("%s still exists after the job started", f)
		}
	}
	disttest.NoErrors(t, disttest.RunRanks(t, comms, 10*time.Second, func(r int, c dist.Communicator) error { return c.Barrier() }))

	seg, name, magic, err := createSegment(2, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.unmap()
	defer removeSegment(name)
	st, err := os.Stat(filepath.Join(shmDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("segment mode %v, want 0600", st.Mode().Perm())
	}
	wrong := append([]byte(nil), magic...)
	wrong[0] ^= 1
	if s, err := openSegment(name, wrong, 2, 4096); err == nil {
		s.unmap()
		t.Error("a segment with another magic was accepted")
	}
	if s, err := openSegment("../"+name, magic, 2, 4096); err == nil {
		s.unmap()
		t.Error("a path outside the shared memory directory was accepted")
	}
	if s, err := openSegment(name, magic, 3, 4096); err == nil {
		s.unmap()
		t.Error("a segment of another geometry was accepted")
	}
	os.Chmod(filepath.Join(shmDir, name), 0o644)
	if s, err := openSegment(name, magic, 2, 4096); err == nil || !strings.Contains(err.Error(), "private") {
		if s != nil {
			s.unmap()
		}
		t.Errorf("a segment readable by others: %v, want a refusal", err)
	}
	os.Chmod(filepath.Join(shmDir, name), 0o600)
	s, err := openSegment(name, magic, 2, 4096)
	if err != nil {
		t.Fatalf("the right magic: %v", err)
	}
	s.unmap()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestShmSwitchedOff: the option, the environment and link emulation keep a job on TCP.
func TestShmSwitchedOff(t *testing.T) {
	cases := []struct {
		name string
		env  string
		opts []dist.Option
	}{
		{"option", "", []dist.Option{dist.WithSharedMemory(false)}},
		{"env", "off", nil},
		{"shaped", "", []dist.Option{dist.WithBandwidth(1e9)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvSharedMemory, tc.env)
			comms := upgradeAll(t, geometry{defaultChunk, defaultSmall}, tcpEngines(t, 2, tc.opts...))
			t.Cleanup(func() { disttest.CloseAll(comms) })
			for r, c := range comms {
				if _, ok := c.(*engine.Engine); !ok {
					t.Fatalf("rank %d: %T, want the TCP engine", r, c)
				}
			}
			errs := disttest.RunRanks(t, comms, 10*time.Second, func(r int, c dist.Communicator) error {
				buf := []float32{float32(r)}
				if err := c.AllReduce(buf, dist.Sum); err != nil {
					return err
				}
				if buf[0] != 1 {
					return fmt.Errorf("sum %v", buf[0])
				}
				// The setup's own collectives are not the caller's.
				if st := c.Stats(); st.AllReduce.Calls != 1 || st.AllGatherV.Calls != 0 {
					return fmt.Errorf("stats count %d allreduces and %d allgathervs, want 1 and 0", st.AllReduce.Calls, st.AllGatherV.Calls)
				}
				return c.(*engine.Engine).Close()
			})
			disttest.NoErrors(t, errs)
		})
	}
}

// BenchmarkShm times the shared memory transport with the ranks as goroutines of this
// process (each with a mapping of its own), like BenchmarkAllReduce and
// BenchmarkAllGatherV; tools/bench-collectives compares separate processes with Open MPI.
func BenchmarkShm(b *testing.B) {
	for _, P := range []int{2, 4} {
		b.Run(fmt.Sprintf("P=%d", P), func(b *testing.B) {
			comms := startShm(b, P)
			for _, size := range disttest.BenchSizes {
				b.Run("AllReduce/"+disttest.SizeName(size), func(b *testing.B) {
					disttest.BenchAllReduce(b, comms, size)
				})
				b.Run("AllGatherV/"+disttest.SizeName(size), func(b *testing.B) {
					disttest.BenchAllGatherV(b, comms, size)
				})
			}
		})
	}
}

// TestShmStats: the traffic reported is the bandwidth-optimal volume of each collective,
// as the MPI backend reports it, and the setup's own collectives are not counted.
func TestShmStats(t *testing.T) {
	const P, n = 3, 1000
	comms := startShm(t, P)
	disttest.NoErrors(t, disttest.RunRanks(t, comms, 10*time.Second, func(r int, c dist.Communicator) error {
		if err := c.AllReduce(make([]float32, n), dist.Sum); err != nil {
			return err
		}
		if _, err := c.AllGatherV(make([]byte, 10*(r+1))); err != nil {
			return err
		}
		st := c.Stats()
		sent, recv := engine.AllReduceVolume(4*n, P)
		gs, gr := engine.AllGatherVolume([]int64{10, 20, 30}, r)
		switch {
		case st.AllReduce.Calls != 1 || st.AllGatherV.Calls != 1:
			return fmt.Errorf("%d allreduces and %d allgathervs counted, want 1 and 1", st.AllReduce.Calls, st.AllGatherV.Calls)
		case st.AllReduce.BytesSent != sent || st.AllReduce.BytesRecv != recv:
			return fmt.Errorf("allreduce traffic %d/%d, want %d/%d", st.AllReduce.BytesSent, st.AllReduce.BytesRecv, sent, recv)
		case st.AllGatherV.BytesSent != gs || st.AllGatherV.BytesRecv != gr:
			return fmt.Errorf("allgatherv traffic %d/%d, want %d/%d", st.AllGatherV.BytesSent, st.AllGatherV.BytesRecv, gs, gr)
		case st.BytesSent != sent+gs:
			return fmt.Errorf("%d bytes sent in all, want %d", st.BytesSent, sent+gs)
		}
		return nil
	}))
}

// TestSpinBudget: ranks keep their core while waiting only when every rank of the machine
// can have one; the core count is the kernel's list of online cores, whatever this
// process's own share of them.
func TestSpinBudget(t *testing.T) {
	for _, c := range []struct {
		ranks, cpus int
		want        time.Duration
	}{{2, 2, shmSpinFor}, {1, 1, shmSpinFor}, {2, 64, shmSpinFor}, {3, 2, 0}, {4, 2, 0}} {
		if got := spinBudget(c.ranks, c.cpus); got != c.want {
			t.Errorf("spinBudget(%d ranks, %d cores) = %v, want %v", c.ranks, c.cpus, got, c.want)
		}
	}
	for _, c := range []struct {
		list string
		want int
	}{{"0", 1}, {"0-1", 2}, {"0-3,8,10-11", 7}, {"", -1}, {"0-x", -1}, {"3-1", -1}, {"a", -1}} {
		if got := countCPUList(c.list, -1); got != c.want {
			t.Errorf("countCPUList(%q) = %d, want %d", c.list, got, c.want)
		}
	}
	if n := onlineCPUs(); n < 1 {
		t.Errorf("onlineCPUs() = %d", n)
	}
}
