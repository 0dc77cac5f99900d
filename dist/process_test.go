package dist

import (
	"bufio"
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// These tests re-execute the test binary as separate worker processes, configured the
// way a launcher would configure them (TCPConfig.Environ), to check what goroutines in
// one process cannot: real processes, and a real process killed.

const childEnv = "SSF_DIST_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	os.Exit(m.Run())
}

// runChild is a worker: it joins the job from its environment and runs one scenario.
func runChild(mode string) int {
	cfg, err := ConfigFromEnv()
	if err != nil {
		fmt.Println("error:", err)
		return 2
	}
	cfg.Timeout, _ = time.ParseDuration(os.Getenv("SSF_DIST_TEST_TIMEOUT"))
	cfg.Bandwidth, _ = ParseBandwidth(os.Getenv("SSF_DIST_TEST_BANDWIDTH"))
	c, err := DialTCP(context.Background(), cfg)
	if err != nil {
		fmt.Println("error:", err)
		return 2
	}
	defer c.Close()
	fail := func(err error) int {
		fmt.Println("error:", err)
		return 1
	}
	switch mode {
	case "collectives":
		buf := randData(cfg.Rank, 100003)
		if err := c.AllReduce(buf, Average); err != nil {
			return fail(err)
		}
		parts, err := c.AllGatherV(gatherData(cfg.Rank, 5000))
		if err != nil {
			return fail(err)
		}
		h := fnv.New64a()
		for _, x := range buf {
			h.Write(f32Bytes([]float32{x}, true))
		}
		for _, p := range parts {
			h.Write(p)
		}
		fmt.Printf("checksum %x\n", h.Sum64())
	case "kill":
		if err := c.Barrier(); err != nil {
			return fail(err)
		}
		fmt.Println("ready")
		if err := c.AllReduce(make([]float32, 1<<20), Sum); err != nil {
			return fail(err)
		}
		fmt.Println("done")
	case "kill-loop":
		// Allreduces back to back until one fails: the kill lands in the middle of one.
		fmt.Println("transport", c)
		if err := c.Barrier(); err != nil {
			return fail(err)
		}
		fmt.Println("ready")
		buf := make([]float32, 4<<20)
		for {
			if err := c.AllReduce(buf, Sum); err != nil {
				return fail(err)
			}
		}
	case "bench":
		size, _ := strconv.Atoi(os.Getenv("SSF_DIST_TEST_SIZE"))
		iters, _ := strconv.Atoi(os.Getenv("SSF_DIST_TEST_ITERS"))
		buf := make([]float32, size/4)
		for range 2 {
			if err := c.AllReduce(buf, Sum); err != nil {
				return fail(err)
			}
		}
		if err := c.Barrier(); err != nil {
			return fail(err)
		}
		start := time.Now()
		for range iters {
			if err := c.AllReduce(buf, Sum); err != nil {
				return fail(err)
			}
		}
		fmt.Printf("elapsed %d\n", time.Since(start).Nanoseconds())
	default:
		return fail(fmt.Errorf("unknown mode %q", mode))
	}
	return 0
}

// child is a running worker process and the lines it printed.
type child struct {
	cmd   *exec.Cmd
	ready chan struct{} // closed when the worker printed "ready"
	out   []string      // read after done
	done  chan struct{}
	err   error
}

func startChildren(t testing.TB, P int, mode string, env ...string) []*child {
	t.Helper()
	addr, err := FreeAddr("127.0.0.1") // a launcher's steps
	if err != nil {
		t.Fatal(err)
	}
	token := NewJobToken()
	kids := make([]*child, P)
	for r := range P {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+mode)
		cmd.Env = append(cmd.Env, TCPConfig{Rank: r, Size: P, MasterAddr: addr, Token: token}.Environ()...)
		cmd.Env = append(cmd.Env, env...)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		k := &child{cmd: cmd, ready: make(chan struct{}), done: make(chan struct{})}
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if sc.Text() == "ready" {
					close(k.ready)
				}
				k.out = append(k.out, sc.Text())
			}
			k.err = cmd.Wait()
			close(k.done)
		}()
		kids[r] = k
	}
	t.Cleanup(func() {
		for _, k := range kids {
			k.cmd.Process.Kill()
			<-k.done
		}
	})
	return kids
}

// waitReady waits until every child has said it is ready, failing the test if one exits
// first or takes longer than 30 s.
func waitReady(t testing.TB, kids []*child) {
	t.Helper()
	for r, k := range kids {
		select {
		case <-k.ready:
		case <-k.done:
			t.Fatalf("worker %d exited early: %v %q", r, k.err, k.out)
		case <-time.After(30 * time.Second):
			t.Fatalf("worker %d never got ready", r)
		}
	}
}

// waitChildren waits for every child, failing the test on a hang.
func waitChildren(t testing.TB, kids []*child, limit time.Duration) {
	t.Helper()
	deadline := time.After(limit)
	for r, k := range kids {
		select {
		case <-k.done:
		case <-deadline:
			t.Fatalf("worker %d still running after %v", r, limit)
		}
	}
}

// TestProcesses: separate worker processes agree bit for bit.
func TestProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const P = 3
	kids := startChildren(t, P, "collectives")
	waitChildren(t, kids, 30*time.Second)
	var sums []string
	for r, k := range kids {
		if k.err != nil {
			t.Fatalf("worker %d: %v: %v", r, k.err, k.out)
		}
		sums = append(sums, strings.Join(k.out, " "))
	}
	for r := 1; r < P; r++ {
		if sums[r] != sums[0] || !strings.HasPrefix(sums[0], "checksum") {
			t.Fatalf("workers disagree: %q", sums)
		}
	}
}

// TestProcessKilled: a worker killed (SIGKILL) in the middle of an allreduce makes the
// others exit with an error naming it, within a bounded time.
func TestProcessKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const P, victim = 3, 2
	kids := startChildren(t, P, "kill", "SSF_DIST_TEST_TIMEOUT=2s", "SSF_DIST_TEST_BANDWIDTH=100Mbit")
	// The allreduce starts right after "ready" and lasts about 0.4 s on these links.
	waitReady(t, kids)
	time.Sleep(100 * time.Millisecond)
	killed := time.Now()
	kids[victim].cmd.Process.Kill()
	waitChildren(t, kids, 20*time.Second)
	t.Logf("survivors exited %v after the kill", time.Since(killed).Round(time.Millisecond))
	for r, k := range kids {
		if r == victim {
			continue
		}
		out := strings.Join(k.out, "\n")
		if k.err == nil || !strings.Contains(out, fmt.Sprintf("dist: rank %d:", victim)) {
			t.Errorf("worker %d: exit %v, output %q; want an error naming rank %d", r, k.err, out, victim)
		} else {
			t.Logf("worker %d: %s", r, k.out[len(k.out)-1])
		}
	}
}

// BenchmarkAllReduceProcesses times a 100 MB allreduce between separate processes
// (shared memory; loopback TCP with SSF_SHM=off), the setting of the reference figures
// (Open MPI, a plain Go ring). tools/bench-collectives sets all sizes against Open MPI.
func BenchmarkAllReduceProcesses(b *testing.B) {
	const size = 100 << 20
	for _, P := range []int{2, 4} {
		b.Run(fmt.Sprintf("P=%d/100MB", P), func(b *testing.B) {
			kids := startChildren(b, P, "bench", "SSF_DIST_TEST_SIZE="+strconv.Itoa(size), "SSF_DIST_TEST_ITERS="+strconv.Itoa(b.N))
			waitChildren(b, kids, 10*time.Minute)
			var worst float64
			for r, k := range kids {
				if k.err != nil || len(k.out) == 0 {
					b.Fatalf("worker %d: %v %q", r, k.err, k.out)
				}
				ns, err := strconv.ParseFloat(strings.TrimPrefix(k.out[len(k.out)-1], "elapsed "), 64)
				if err != nil {
					b.Fatalf("worker %d: %q", r, k.out)
				}
				worst = math.Max(worst, ns)
			}
			sec := worst / 1e9 / float64(b.N)
			b.ReportMetric(sec*1e3, "ms")
			b.ReportMetric(size*2*float64(P-1)/float64(P)/sec/1e9, "busGB/s")
		})
	}
}
