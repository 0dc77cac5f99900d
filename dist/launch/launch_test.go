package launch

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/disttest"
	"github.com/ssfusion/ssfusion/dist/tcp"
)

// TestLaunchWorkerHelper is not a test: it is the worker that the launch tests start, by
// re-running the test binary with SSF_LAUNCH_ROLE set.
func TestLaunchWorkerHelper(t *testing.T) {
	role := os.Getenv("SSF_LAUNCH_ROLE")
	if role == "" {
		t.Skip("only runs as a launched worker")
	}
	cfg, err := tcp.ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(2)
	}
	fmt.Printf("pid %d rank %d of %d master %s token %t gomaxprocs %s cpus %s\n", os.Getpid(), cfg.Rank, cfg.Size,
		cfg.MasterAddr, cfg.Token != "", os.Getenv("GOMAXPROCS"), allowedCPUs())
	switch {
	case role == "ok":
		os.Exit(0)
	case role == "allreduce":
		// Join the job and sum the ranks: every rank must see 0+1+...+size-1. First make
		// sure that no process could take rank 0's port from it: the launcher holds it,
		// and then rank 0 does, from before any worker started.
		if ln, err := net.Listen("tcp", cfg.MasterAddr); err == nil {
			ln.Close()
			fmt.Fprintf(os.Stderr, "worker: rank 0's port %s was free for anyone to take\n", cfg.MasterAddr)
			os.Exit(4)
		}
		comm, err := tcp.Dial(context.Background(), cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(2)
		}
		v := []float32{float32(cfg.Rank)}
		if err := comm.AllReduce(v, dist.Sum); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(2)
		}
		fmt.Printf("sum %g local %s\n", v[0], os.Getenv(tcp.EnvLocalRank))
		comm.Close()
		os.Exit(0)
	case role == "extra-file":
		// Only rank 0 was handed a file at descriptor 3; elsewhere the write fails.
		fmt.Fprintf(os.NewFile(3, "extra"), "rank %d wrote here\n", cfg.Rank)
		os.Exit(0)
	case role == "die-rank-1" && cfg.Rank == 1:
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case role == "fail-rank-2" && cfg.Rank == 2:
		fmt.Fprintln(os.Stderr, "worker: giving up")
		os.Exit(3)
	}
	time.Sleep(time.Hour) // the others hang until the launcher ends them
}

// allowedCPUs is the list of CPUs this process may run on, as Linux reports it ("0-1",
// "0,2-3"), or "?" elsewhere.
func allowedCPUs() string {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// launchHelpers runs workers of the given role and returns Run's error, what they
// printed and their pids.
func launchHelpers(t *testing.T, ctx context.Context, role string, workers int) (error, string, []int) {
	t.Helper()
	return launchHelpersWith(t, ctx, role, workers, func(*Config) {})
}

// launchHelpersWith is launchHelpers with the job's configuration edited first.
func launchHelpersWith(t *testing.T, ctx context.Context, role string, workers int, edit func(*Config)) (error, string, []int) {
	t.Helper()
	var out, errOut disttest.CapturedLog
	cfg := Config{
		Workers: workers, Program: os.Args[0], Args: []string{"-test.run=^TestLaunchWorkerHelper$"},
		Env: []string{"SSF_LAUNCH_ROLE=" + role}, Stdout: &out, Stderr: &errOut, Grace: 500 * time.Millisecond,
	}
	edit(&cfg)
	err := Run(ctx, cfg)
	var pids []int
	for _, line := range strings.Split(out.String(), "\n") {
		if i := strings.Index(line, "pid "); i >= 0 {
			f := strings.Fields(line[i:])
			if pid, perr := strconv.Atoi(f[1]); perr == nil {
				pids = append(pids, pid)
			}
		}
	}
	return err, out.String() + errOut.String(), pids
}

func assertGone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("worker pid %d outlived the launcher", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func TestLaunchAllSucceed(t *testing.T) {
	err, out, pids := launchHelpers(t, context.Background(), "ok", 3)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out)
	}
	if len(pids) != 3 {
		t.Fatalf("%d workers reported, want 3:\n%s", len(pids), out)
	}
	for r := range 3 {
		if !strings.Contains(out, fmt.Sprintf("[rank %d] pid", r)) || !strings.Contains(out, fmt.Sprintf("rank %d of 3 master 127.0.0.1:", r)) {
			t.Errorf("no prefixed line with the environment of rank %d:\n%s", r, out)
		}
	}
	if !strings.Contains(out, "token true") {
		t.Errorf("workers got no job token:\n%s", out)
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		want := fmt.Sprintf("gomaxprocs %d", max(1, runtime.NumCPU()/3))
		if strings.Count(out, want) != 3 {
			t.Errorf("workers do not share the %d cores (%s each):\n%s", runtime.NumCPU(), want, out)
		}
	}
}

func TestLaunchFailures(t *testing.T) {
	for _, tc := range []struct {
		role  string
		wants []string
	}{
		{"die-rank-1", []string{"rank 1 was killed by signal killed"}},
		{"fail-rank-2", []string{"rank 2 failed: exit status 3", "rank 0 was still running after the grace period and was killed"}},
	} {
		t.Run(tc.role, func(t *testing.T) {
			start := time.Now()
			err, out, pids := launchHelpers(t, context.Background(), tc.role, 3)
			if err == nil {
				t.Fatalf("Run succeeded:\n%s", out)
			}
			for _, want := range tc.wants {
				if !strings.HasPrefix(err.Error(), want) && !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if !strings.HasPrefix(err.Error(), tc.wants[0]) {
				t.Errorf("error %q does not start with the failed rank", err)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("the job took %v to end", d)
			}
			assertGone(t, pids)
		})
	}
}

func TestLaunchInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err, out, pids := launchHelpers(t, ctx, "hang", 2)
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("error %v, want an interruption\n%s", err, out)
	}
	assertGone(t, pids)
}

// TestLaunchOneNode: a job on one node forms and sums, and every worker finds rank 0's
// port taken: Run holds it from before the first worker starts and rank 0 inherits it,
// so no other process can have taken it in between.
func TestLaunchOneNode(t *testing.T) {
	const workers = 3
	err, out, pids := launchHelpers(t, context.Background(), "allreduce", workers)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out)
	}
	for r := range workers {
		if want := fmt.Sprintf("[rank %d] sum 3 local %d", r, r); !strings.Contains(out, want) {
			t.Errorf("no line %q:\n%s", want, out)
		}
	}
	assertGone(t, pids)
}

func TestLaunchRejectsNoWorkers(t *testing.T) {
	if err := Run(context.Background(), Config{Workers: 0}); err == nil {
		t.Fatal("a job of 0 workers was launched")
	}
}

// TestLaunchRankZeroFiles: the files of RankZeroFiles reach rank 0 alone, unprefixed.
func TestLaunchRankZeroFiles(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out, errOut disttest.CapturedLog
	err = Run(context.Background(), Config{
		Workers: 3, Program: os.Args[0], Args: []string{"-test.run=^TestLaunchWorkerHelper$"},
		Env: []string{"SSF_LAUNCH_ROLE=extra-file"}, Stdout: &out, Stderr: &errOut, RankZeroFiles: []*os.File{w},
	})
	w.Close()
	if err != nil {
		t.Fatalf("Run: %v\n%s%s", err, out.String(), errOut.String())
	}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "rank 0 wrote here\n" {
		t.Errorf("the extra file received %q, want rank 0's line alone", got)
	}
}

// TestLaunchTwoNodes: two launchers, as on two machines, each start 2 workers; together
// they form one job of 4 ranks (global ranks by node, local ranks from 0 on each node)
// whose allreduce every rank completes alike.
func TestLaunchTwoNodes(t *testing.T) {
	// Node 0's launcher hands this listener to rank 0; node 1's workers may dial it before
	// rank 0 runs and wait in its backlog.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	token := tcp.NewJobToken()
	outs := make([]disttest.CapturedLog, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for node := range 2 {
		cfg := Config{
			Workers: 2, Nodes: 2, NodeRank: node, MasterAddr: ln.Addr().String(), Token: token,
			Program: os.Args[0], Args: []string{"-test.run=^TestLaunchWorkerHelper$"},
			Env: []string{"SSF_LAUNCH_ROLE=allreduce"}, Stdout: &outs[node], Grace: 2 * time.Second,
		}
		if node == 0 {
			cfg.MasterListener = ln
		}
		wg.Go(func() {
			var errOut disttest.CapturedLog
			cfg.Stderr = &errOut
			errs[node] = Run(context.Background(), cfg)
			if errs[node] != nil {
				errs[node] = fmt.Errorf("%w\n%s", errs[node], errOut.String())
			}
		})
	}
	wg.Wait()
	for node := range 2 {
		if errs[node] != nil {
			t.Fatalf("node %d: %v", node, errs[node])
		}
		out := outs[node].String()
		for local := range 2 {
			rank := 2*node + local
			if !strings.Contains(out, fmt.Sprintf("[rank %d] pid", rank)) || !strings.Contains(out, fmt.Sprintf("rank %d of 4", rank)) ||
				!strings.Contains(out, fmt.Sprintf("[rank %d] sum 6 local %d", rank, local)) {
				t.Errorf("node %d: rank %d (local %d) did not join the 4-rank job and sum 6:\n%s", node, rank, local, out)
			}
		}
	}
}

// Several nodes need the master's address and a shared token; a node rank must be one of
// the nodes.
func TestLaunchNodeErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Workers: 2, Nodes: 2, NodeRank: 0, Token: "t"},
		{Workers: 2, Nodes: 2, NodeRank: 1, MasterAddr: "127.0.0.1:1234"},
		{Workers: 2, Nodes: 2, NodeRank: 2, MasterAddr: "127.0.0.1:1234", Token: "t"},
	} {
		if err := Run(context.Background(), cfg); err == nil {
			t.Errorf("%+v: launched", cfg)
		}
	}
}
