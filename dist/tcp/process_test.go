package tcp

import (
	"bufio"
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/disttest"
	"github.com/ssfusion/ssfusion/dist/internal/wire"
	"github.com/ssfusion/ssfusion/dist/shm"
)

// These tests re-execute the test binary as separate worker processes, configured the
// way a launcher would configure them (Config.Environ), to check what goroutines in
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
	cfg.Bandwidth, _ = dist.ParseBandwidth(os.Getenv("SSF_DIST_TEST_BANDWIDTH"))
	var opts []dist.Option
	if spec := os.Getenv(crashEnv); spec != "" {
		hook, err := crashHook(spec, cfg.Rank)
		if err != nil {
			fmt.Println("error:", err)
			return 2
		}
		if hook != nil {
			opts = append(opts, dist.WithFaultHook(hook))
		}
	}
	c, err := Dial(context.Background(), cfg, opts...)
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
		buf := disttest.RandData(cfg.Rank, 100003)
		if err := c.AllReduce(buf, dist.Average); err != nil {
			return fail(err)
		}
		parts, err := c.AllGatherV(disttest.GatherData(cfg.Rank, 5000))
		if err != nil {
			return fail(err)
		}
		h := fnv.New64a()
		for _, x := range buf {
			h.Write(wire.F32Bytes([]float32{x}, true))
		}
		for _, p := range parts {
			h.Write(p)
		}
		fmt.Printf("checksum %x\n", h.Sum64())
	case "kill":
		// One rank's process dies in the middle of the allreduce (crashEnv).
		fmt.Println("transport", c)
		if err := c.AllReduce(make([]float32, 1<<20), dist.Sum); err != nil {
			return fail(err)
		}
		fmt.Println("done")
	case "bench":
		size, _ := strconv.Atoi(os.Getenv("SSF_DIST_TEST_SIZE"))
		iters, _ := strconv.Atoi(os.Getenv("SSF_DIST_TEST_ITERS"))
		buf := make([]float32, size/4)
		for range 2 {
			if err := c.AllReduce(buf, dist.Sum); err != nil {
				return fail(err)
			}
		}
		if err := c.Barrier(); err != nil {
			return fail(err)
		}
		start := time.Now()
		for range iters {
			if err := c.AllReduce(buf, dist.Sum); err != nil {
				return fail(err)
			}
		}
		fmt.Printf("elapsed %d\n", time.Since(start).Nanoseconds())
	default:
		return fail(fmt.Errorf("unknown mode %q", mode))
	}
	return 0
}

// crashEnv makes one worker crash at a fault point of the first allreduce: its value is
// "rank point n", the process of that rank killing itself (SIGKILL) at event n (from 0)
// of the named point.
const crashEnv = "SSF_DIST_TEST_CRASH"

// crashHook returns the fault hook that crashEnv's spec asks of rank, nil if it names
// another rank.
func crashHook(spec string, rank int) (dist.FaultHook, error) {
	var victim, n int
	var name string
	if _, err := fmt.Sscanf(spec, "%d %s %d", &victim, &name, &n); err != nil {
		return nil, fmt.Errorf("%s=%q: want \"rank point n\": %w", crashEnv, spec, err)
	}
	var point dist.FaultPoint
	for _, p := range dist.FaultPoints() {
		if p.String() == name {
			point = p
		}
	}
	if point == 0 {
		return nil, fmt.Errorf("%s=%q: no fault point %q", crashEnv, spec, name)
	}
	if victim != rank {
		return nil, nil
	}
	return func(ev dist.FaultEvent) dist.FaultAction {
		if ev.Point != point || ev.Collective != "allreduce" || ev.Seq != 1 || ev.N != n {
			return dist.FaultNone
		}
		fmt.Printf("crashing at %v %d\n", point, n)
		self, err := os.FindProcess(os.Getpid())
		if err == nil {
			err = self.Kill()
		}
		if err != nil {
			fmt.Println("error: cannot crash:", err)
			os.Exit(3)
		}
		select {} // until the signal lands
	}, nil
}

// child is a running worker process and the lines it printed.
type child struct {
	cmd  *exec.Cmd
	out  []string // read after done
	done chan struct{}
	err  error
}

// startChildren starts P workers of a job as a launcher does: it holds rank 0's port from
// the start and hands the listener to rank 0's process.
func startChildren(t testing.TB, P int, mode string, env ...string) []*child {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() // once rank 0 has started, it holds the port
	token := NewJobToken()
	kids := make([]*child, 0, P)
	t.Cleanup(func() {
		for _, k := range kids {
			k.cmd.Process.Kill()
			<-k.done
		}
	})
	for r := range P {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+mode)
		cmd.Env = append(cmd.Env, Config{Rank: r, Size: P, MasterAddr: ln.Addr().String(), Token: token}.Environ()...)
		cmd.Env = append(cmd.Env, env...)
		var inherited *os.File
		if r == 0 {
			if inherited, err = InheritListener(cmd, ln); err != nil {
				t.Fatal(err)
			}
		}
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		err = cmd.Start()
		if inherited != nil {
			inherited.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		k := &child{cmd: cmd, done: make(chan struct{})}
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				k.out = append(k.out, sc.Text())
			}
			k.err = cmd.Wait()
			close(k.done)
		}()
		kids = append(kids, k)
	}
	return kids
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

// TestProcessKilled: a worker whose process is killed (SIGKILL) in the middle of an
// allreduce, at a fault point, makes the others exit with an error naming it, long
// before their timeout.
func TestProcessKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const P, victim = 3, 2
	cases := []struct {
		name  string
		point dist.FaultPoint
		shm   bool // the job runs on shared memory, else on TCP
	}{
		{"tcp/partial-frame", dist.FaultPartialFrame, false},
		{"tcp/after-send", dist.FaultAfterSend, false},
		{"shm/step", dist.FaultShmStep, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.shm && !shm.Supported {
				t.Skip("no shared memory transport on this system")
			}
			env := []string{"SSF_DIST_TEST_TIMEOUT=1m", fmt.Sprintf("%s=%d %v 2", crashEnv, victim, tc.point)}
			if !tc.shm {
				env = append(env, shm.EnvSharedMemory+"=off")
			}
			kids := startChildren(t, P, "kill", env...)
			waitChildren(t, kids, 30*time.Second)
			if out := strings.Join(kids[victim].out, "\n"); disttest.Signaled(kids[victim].err) == nil || !strings.Contains(out, "crashing at") {
				t.Fatalf("worker %d: exit %v, output %q; want a crash at %v", victim, kids[victim].err, out, tc.point)
			}
			for r, k := range kids {
				if r == victim {
					continue
				}
				out := strings.Join(k.out, "\n")
				if onShm := strings.Contains(out, "shared memory"); onShm != tc.shm {
					t.Errorf("worker %d: on shared memory %t, want %t: %q", r, onShm, tc.shm, out)
				}
				if k.err == nil || !strings.Contains(out, fmt.Sprintf("dist: rank %d:", victim)) {
					t.Errorf("worker %d: exit %v, output %q; want an error naming rank %d", r, k.err, out, victim)
				} else {
					t.Logf("worker %d: %s", r, k.out[len(k.out)-1])
				}
			}
		})
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
