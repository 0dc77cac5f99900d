// Package launch starts the worker processes of a job, as torchrun does: on this machine,
// or on each node of several, with the environment that tcp.ConfigFromEnv reads, and
// supervises them so that one worker's failure ends the job with the worker named.
package launch

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ssfusion/ssfusion/dist/tcp"
)

// Config describes a job of worker processes on this machine, as torchrun starts
// them: the same program and arguments, with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT and SSF_JOB_TOKEN set for each.
//
// Unless GOMAXPROCS is set, each worker runs that many threads as its share of the
// machine's CPUs, and on Linux, when there are at least as many CPUs as workers, it is
// bound to a share of its own, as mpirun binds ranks to cores; SSF_BIND=none leaves the
// workers unbound.
type Config struct {
	Workers int
	Program string   // default: this executable
	Args    []string // arguments of every worker, without the program name
	Env     []string // extra variables, after os.Environ()
	// Threads, when positive, is every worker's GOMAXPROCS, and the workers are left
	// unbound to share every core; it overrides a GOMAXPROCS in the environment.
	Threads int
	// MasterHost is where rank 0 listens for the rendezvous (default 127.0.0.1).
	MasterHost string
	// Nodes and NodeRank spread the job over machines, as torchrun's --nnodes and
	// --node-rank do: this launcher's workers are ranks NodeRank·Workers to
	// NodeRank·Workers+Workers-1 of Nodes·Workers. With more than one node, MasterAddr
	// (host:port where rank 0, on node 0, listens) and Token (the same on every node) must
	// be given; on one node they are chosen here when empty.
	Nodes, NodeRank int
	MasterAddr      string
	Token           string
	// MasterListener, on node 0 only, is rank 0's rendezvous listener, already open; rank
	// 0 inherits it (tcp.InheritListener) instead of listening itself, and MasterAddr defaults
	// to its address. On one node without MasterAddr, Run opens one on MasterHost
	// itself. Either way the port is held from before any worker starts until the
	// rendezvous, so no other process can take it in between. Run closes it.
	MasterListener net.Listener
	// Stdout and Stderr receive the workers' lines, each prefixed with "[rank N] "
	// (default os.Stdout and os.Stderr).
	Stdout, Stderr io.Writer
	// Grace is how long the other workers may take to notice a failed one and exit on
	// their own before they are killed (default 10s).
	Grace time.Duration
	// RankZeroFiles are handed to rank 0 alone, as its file descriptors 3, 4 and so on,
	// past the line prefixing of Stdout and Stderr: a terminal on which it can draw a
	// progress bar, for instance.
	RankZeroFiles []*os.File
}

// EnvBind, read by Run, set to "none" leaves the workers unbound (see Config).
const EnvBind = "SSF_BIND"

// Run runs the job and waits for every worker. It returns nil when all exit with status
// 0; otherwise an error naming the first rank that failed. When one worker fails, or ctx is
// cancelled, the others get Grace to end (they are sent SIGINT on cancellation) and are then
// killed, so no process outlives Run. On Linux the workers are also killed if the
// launcher itself dies.
func Run(ctx context.Context, cfg Config) error {
	if cfg.MasterListener != nil {
		defer cfg.MasterListener.Close()
	}
	if cfg.Workers < 1 {
		return fmt.Errorf("dist: launch: want at least 1 worker, got %d", cfg.Workers)
	}
	if cfg.Program == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("dist: launch: finding this program: %w", err)
		}
		cfg.Program = exe
	}
	if cfg.MasterHost == "" {
		cfg.MasterHost = "127.0.0.1"
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	base, master, err := cfg.rendezvous()
	if err != nil {
		return err
	}
	if master != nil {
		defer master.Close() // rank 0 holds the port once it has started
	}
	first := cfg.NodeRank * cfg.Workers
	job := &job{cfg: cfg, first: first, master: master, exited: make(chan exit, cfg.Workers)}
	if _, set := os.LookupEnv("GOMAXPROCS"); !set && cfg.Threads <= 0 {
		// Binding goes with the share of threads given below: a user who chose the
		// threads chooses the placement too.
		job.cpus = workerCPUs(cfg.Workers)
	}
	for local := range cfg.Workers {
		base.Rank = first + local
		env := append(base.Environ(), tcp.EnvLocalRank+"="+strconv.Itoa(local)) // the later value wins
		if err := job.start(local, env); err != nil {
			job.killAll()
			job.wait()
			return err
		}
	}
	return job.supervise(ctx)
}

// rendezvous checks the nodes' settings and returns the job's shared configuration (where
// rank 0 listens, the token, the world size) and the listener that rank 0 is to inherit,
// if this node has one.
func (cfg *Config) rendezvous() (tcp.Config, net.Listener, error) {
	nodes := max(1, cfg.Nodes)
	if cfg.NodeRank < 0 || cfg.NodeRank >= nodes {
		return tcp.Config{}, nil, fmt.Errorf("dist: launch: node rank %d of %d nodes: want 0 <= node rank < nodes", cfg.NodeRank, nodes)
	}
	master := cfg.MasterListener
	if master != nil {
		if cfg.NodeRank != 0 {
			return tcp.Config{}, nil, fmt.Errorf("dist: launch: node %d was given the rendezvous listener, which belongs to rank 0 on node 0", cfg.NodeRank)
		}
		if cfg.MasterAddr == "" {
			cfg.MasterAddr = master.Addr().String()
		}
	}
	base := tcp.Config{Size: nodes * cfg.Workers, MasterAddr: cfg.MasterAddr, Token: cfg.Token}
	if nodes > 1 {
		if _, _, err := net.SplitHostPort(cfg.MasterAddr); err != nil || cfg.Token == "" {
			return tcp.Config{}, nil, fmt.Errorf("dist: launch on %d nodes needs the master's host:port (got %q) and a job token shared by every node (%s)", nodes, cfg.MasterAddr, tcp.EnvJobToken)
		}
		return base, master, nil
	}
	if base.MasterAddr == "" {
		// The port goes to the workers in their environment before rank 0 runs: rank 0
		// inherits this listener rather than binding the port again, which another
		// process could have taken by then.
		ln, err := net.Listen("tcp", net.JoinHostPort(cfg.MasterHost, "0"))
		if err != nil {
			return tcp.Config{}, nil, fmt.Errorf("dist: launch: listen for the rendezvous on %s: %w", cfg.MasterHost, err)
		}
		master, base.MasterAddr = ln, ln.Addr().String()
	}
	if base.Token == "" {
		base.Token = tcp.NewJobToken()
	}
	return base, master, nil
}

// job is a running set of workers.
type job struct {
	cfg    Config
	first  int          // the global rank of the first local worker
	master net.Listener // rank 0's rendezvous listener, which it inherits; nil: none here
	mu     sync.Mutex   // serialises output lines
	procs  []*exec.Cmd
	exited chan exit
	cpus   [][]int // per local worker, the CPUs it is bound to; nil: unbound
}

type exit struct {
	rank int
	err  error
}

func (j *job) start(rank int, env []string) error {
	cmd := exec.Command(j.cfg.Program, j.cfg.Args...)
	cmd.Env = append(append(os.Environ(), env...), j.cfg.Env...)
	if _, set := os.LookupEnv("GOMAXPROCS"); j.cfg.Threads > 0 {
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(j.cfg.Threads))
	} else if !set {
		// Workers that outnumber the cores would otherwise each run a thread per core and
		// fight over them.
		procs := max(1, runtime.NumCPU()/j.cfg.Workers)
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(procs))
	}
	cmd.SysProcAttr = workerAttr()
	// A variable inherited from this launcher's own environment must not send a worker
	// looking for a descriptor it was not given; the last value of a name wins.
	cmd.Env = append(cmd.Env, tcp.EnvMasterFD+"=")
	if rank == 0 {
		cmd.ExtraFiles = slices.Clip(j.cfg.RankZeroFiles)
		if j.master != nil {
			f, err := tcp.InheritListener(cmd, j.master)
			if err != nil {
				return fmt.Errorf("dist: launch rank %d: %w", j.first, err)
			}
			defer f.Close() // the worker has its own copy once started
		}
	}
	var cpus []int
	if j.cpus != nil {
		cpus = j.cpus[rank]
	}
	prefix := fmt.Sprintf("[rank %d] ", j.first+rank)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("dist: launch rank %d: %w", j.first+rank, err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("dist: launch rank %d: %w", j.first+rank, err)
	}
	if err := startOn(cmd, cpus); err != nil {
		return fmt.Errorf("dist: launch rank %d: %w", j.first+rank, err)
	}
	if rank == 0 && j.master != nil {
		j.master.Close() // rank 0 holds the port now
	}
	j.procs = append(j.procs, cmd)
	var copying sync.WaitGroup
	copying.Add(2)
	go j.copyLines(&copying, j.cfg.Stdout, stdout, prefix)
	go j.copyLines(&copying, j.cfg.Stderr, stderr, prefix)
	go func() {
		copying.Wait() // Wait must not run before the pipes are drained
		j.exited <- exit{rank, cmd.Wait()}
	}()
	return nil
}

// copyLines prefixes each line of r and writes it whole to w.
func (j *job) copyLines(done *sync.WaitGroup, w io.Writer, r io.Reader, prefix string) {
	defer done.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		j.mu.Lock()
		fmt.Fprintf(w, "%s%s\n", prefix, sc.Bytes())
		j.mu.Unlock()
	}
	io.Copy(io.Discard, r) // a line too long for the scanner must not block the worker
}

// supervise waits for the workers; the first failure or ctx's end starts the grace period.
func (j *job) supervise(ctx context.Context) error {
	var failed []exit
	var interrupted error
	var deadline <-chan time.Time
	running := make(map[int]bool, len(j.procs))
	for rank := range j.procs {
		running[rank] = true
	}
	stopped := map[int]bool{} // ranks the launcher killed
	done := ctx.Done()
	for len(running) > 0 {
		select {
		case e := <-j.exited:
			delete(running, e.rank)
			if e.err != nil {
				failed = append(failed, e)
				if deadline == nil && len(stopped) == 0 {
					deadline = time.After(j.cfg.Grace)
				}
			}
		case <-done:
			done = nil
			interrupted = fmt.Errorf("job interrupted: %w", ctx.Err())
			j.signalAll(syscall.SIGINT)
			deadline = time.After(j.cfg.Grace)
		case <-deadline:
			for rank := range running {
				stopped[rank] = true
			}
			j.killAll()
			deadline = nil
		}
	}
	if interrupted != nil {
		return interrupted
	}
	return describeFailures(failed, stopped, j.first)
}

// describeFailures names the failed ranks (local ones, the first of which is global rank
// first) in the order that explains the failure: those that died of a signal, then those
// that exited with an error, then those the launcher stopped after the grace period.
func describeFailures(failed []exit, stopped map[int]bool, first int) error {
	if len(failed) == 0 {
		return nil
	}
	order := func(e exit) int {
		switch {
		case stopped[e.rank]:
			return 2
		case signaled(e.err) != nil:
			return 0
		}
		return 1
	}
	slices.SortStableFunc(failed, func(a, b exit) int { return cmp.Compare(order(a), order(b)) })
	parts := make([]string, len(failed))
	for i, e := range failed {
		switch sig := signaled(e.err); {
		case stopped[e.rank]:
			parts[i] = fmt.Sprintf("rank %d was still running after the grace period and was killed", first+e.rank)
		case sig != nil:
			parts[i] = fmt.Sprintf("rank %d was killed by signal %v", first+e.rank, sig)
		default:
			parts[i] = fmt.Sprintf("rank %d failed: %v", first+e.rank, e.err)
		}
	}
	return errors.New(strings.Join(parts, "; "))
}

// signaled returns the signal that ended a worker, or nil.
func signaled(err error) os.Signal {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ws.Signal()
		}
	}
	return nil
}

// signalAll signals every worker; one that already exited just reports an error, ignored.
func (j *job) signalAll(sig os.Signal) {
	for _, p := range j.procs {
		p.Process.Signal(sig)
	}
}

func (j *job) killAll() { j.signalAll(os.Kill) }

// wait reaps the workers started so far (after a failed start).
func (j *job) wait() {
	for range j.procs {
		<-j.exited
	}
}
