package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Kinds of fault a trial injects.
const (
	kindKill      = "kill"       // SIGKILL a worker mid-training
	kindStop      = "stop"       // SIGSTOP a worker for longer than the timeout
	kindSlow      = "slow"       // SIGSTOP a worker for a fraction of the timeout, then SIGCONT
	kindFrame     = "frame"      // crash a worker at a transport fault point
	kindReset     = "reset"      // a worker's connections drop at a transport fault point
	kindWrite     = "write"      // crash a worker while it writes a checkpoint or a result
	kindCorrupt   = "corrupt"    // damage a checkpoint file, then resume from it
	kindDiskFull  = "disk-full"  // the results' file system fills up
	kindRunner    = "experiment" // crash the experiment runner between cells or in its report
	kindPartition = "partition"  // cut the link between the two nodes of a job
	kindLossy     = "lossy"      // make the link between the two nodes of a job slow and lossy
)

// allKinds are the kinds a campaign draws from by default.
var allKinds = []string{kindKill, kindStop, kindSlow, kindFrame, kindReset, kindWrite, kindCorrupt, kindDiskFull, kindRunner, kindPartition, kindLossy}

// job is the training every trial runs: small enough for a trial to take seconds, long
// enough to checkpoint several times.
type job struct {
	bin       string        // the ssfusion binary
	steps     int           // --max-steps
	every     int           // --checkpoint-every
	timeout   time.Duration // --timeout: how long a silent peer is waited for
	trialTime time.Duration // a trial's run that has not ended by then violates the invariants
}

// setup is what varies between trials besides the fault: the transport and the number of
// ranks.
type setup struct {
	transport string // tcp or shm
	workers   int
}

func (s setup) String() string { return fmt.Sprintf("%s, %d workers", s.transport, s.workers) }

// trial is one fault injected into one training.
type trial struct {
	id    int
	seed  uint64
	kind  string
	setup setup
	rank  int    // the rank the fault hits
	step  int    // the step after which an external fault (signal, damage) strikes
	fault string // SSF_FAULT for faults at a fault point
	what  string // a description of the fault, for the report
}

// draw chooses trial id of a campaign of seed: its kind among kinds and the rest at
// random, the same for the same seed.
func draw(seed uint64, id int, kinds []string, j job) trial {
	rng := rand.New(rand.NewPCG(seed, uint64(id)))
	t := trial{id: id, seed: seed, kind: kinds[id%len(kinds)]}
	t.setup = setup{transport: []string{"tcp", "shm"}[rng.IntN(2)], workers: []int{2, 4}[rng.IntN(2)]}
	t.rank = rng.IntN(t.setup.workers)
	t.step = 3 + rng.IntN(j.steps-6)
	switch t.kind {
	case kindKill, kindStop, kindSlow:
		t.what = fmt.Sprintf("rank %d after step %d", t.rank, t.step)
	case kindFrame, kindReset:
		points := []string{"before-send", "partial-frame", "after-send"}
		if t.setup.transport == "shm" {
			// On shared memory the data goes through the segment; the TCP mesh carries
			// only the setup, so a crash there happens at a step.
			points = []string{"shm-step"}
		}
		// A step sends a few frames on TCP and takes a few steps of shared memory; the
		// ranges keep most faults within the training.
		point, hit := points[rng.IntN(len(points))], 1+rng.IntN(4*j.steps)
		if t.setup.transport == "shm" {
			hit = 1 + rng.IntN(j.steps/2)
		}
		action := "crash"
		if t.kind == kindReset {
			action = "error"
		}
		t.fault = fmt.Sprintf("point=%s hit=%d rank=%d action=%s", point, hit, t.rank, action)
		t.what = fmt.Sprintf("rank %d, %s, arrival %d", t.rank, point, hit)
	case kindWrite:
		point := []string{"write-partial", "write-before-rename"}[rng.IntN(2)]
		files := []string{fmt.Sprintf("step-%08d.rank-%d.gob", j.every*(1+rng.IntN(j.steps/j.every-1)), t.rank)}
		if t.rank == 0 {
			files = append(files, "latest.json", "summary.json", "metrics.csv")
		}
		file := files[rng.IntN(len(files))]
		t.fault = fmt.Sprintf("point=%s file=%s rank=%d", point, file, t.rank)
		t.what = fmt.Sprintf("rank %d, %s of %s", t.rank, point, file)
	case kindCorrupt:
		t.step = j.every*2 + 1 + rng.IntN(j.every-1) // after the second checkpoint
		t.what = fmt.Sprintf("rank %d killed after step %d, then a checkpoint file %s", t.rank, t.step, []string{"truncated", "with a bit flipped"}[rng.IntN(2)])
	case kindDiskFull:
		t.what = "results on a file system too small for a checkpoint"
	case kindPartition, kindLossy:
		// Two machines share no memory: the job runs on TCP, between the namespaces.
		t.setup.transport = "tcp"
		what := "cut"
		if t.kind == kindLossy {
			what = "throttled to 20 Mbit/s with a 2 ms queue"
		}
		t.what = fmt.Sprintf("%d workers on each of 2 network namespaces, the link %s after step %d", t.setup.workers/2, what, t.step)
	case kindRunner:
		t.fault = []string{"point=cell-done hit=1", "point=write-partial file=report.md", "point=write-before-rename file=report.md"}[rng.IntN(3)]
		t.what = "the runner of a 2-cell experiment, " + strings.TrimPrefix(t.fault, "point=")
	}
	return t
}

// run is one process tree of ssfusion: a launcher and its workers, in a process group of
// their own.
type run struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []line
	seen  chan struct{} // closed once the awaited line appears
	await string
	done  chan struct{}
	err   error
	ended time.Time
}

// line is one line of output and when it arrived.
type line struct {
	at   time.Time
	text string
}

// start runs bin with args in dir, with env added, and collects its output; await, if
// not empty, is a text whose appearance seen signals.
func start(dir, bin string, args, env []string, await string) (*run, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	r := &run{cmd: cmd, seen: make(chan struct{}), await: await, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		closed := false
		for sc.Scan() {
			r.mu.Lock()
			r.lines = append(r.lines, line{time.Now(), sc.Text()})
			r.mu.Unlock()
			if !closed && r.await != "" && strings.Contains(sc.Text(), r.await) {
				close(r.seen)
				closed = true
			}
		}
		r.err = cmd.Wait()
		r.ended = time.Now()
		close(r.done)
	}()
	return r, nil
}

// wait waits for the run to end, at most limit; a run still going is killed, group and
// all, and reported.
func (r *run) wait(limit time.Duration) error {
	select {
	case <-r.done:
		return nil
	case <-time.After(limit):
		syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.done
		return fmt.Errorf("still running after %v", limit)
	}
}

// output is everything the run printed.
func (r *run) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, l := range r.lines {
		b.WriteString(l.text)
		b.WriteByte('\n')
	}
	return b.String()
}

// firstLine returns when a line containing text appeared.
func (r *run) firstLine(text string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		if strings.Contains(l.text, text) {
			return l.at, true
		}
	}
	return time.Time{}, false
}

// exitCode is the run's exit code, -1 if a signal ended it.
func (r *run) exitCode() int {
	var exit *exec.ExitError
	switch {
	case r.err == nil:
		return 0
	case errors.As(r.err, &exit):
		return exit.ExitCode()
	}
	return -1
}

// groupGone reports whether every process of the run's group has ended, waiting a little
// for the kernel to reap them.
func (r *run) groupGone() bool {
	deadline := time.Now().Add(3 * time.Second)
	for {
		if err := syscall.Kill(-r.cmd.Process.Pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// workerPID finds the process of rank among the launcher's children, by the RANK its
// environment holds.
func workerPID(launcher, rank int) (int, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", launcher))
	if err != nil {
		return 0, err
	}
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(field)
			if err != nil {
				continue
			}
			env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			if err != nil {
				continue
			}
			for _, kv := range strings.Split(string(env), "\x00") {
				if kv == "RANK="+strconv.Itoa(rank) {
					return pid, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("no worker of rank %d among the children of %d", rank, launcher)
}

// trainArgs are the command line of the trials' training, writing into out.
func (j job) trainArgs(s setup, out string) []string {
	return []string{"train", "--model", "mlp", "--dataset", "synthetic", "--workers", strconv.Itoa(s.workers),
		"--max-steps", strconv.Itoa(j.steps), "--checkpoint-every", strconv.Itoa(j.every), "--check-every", strconv.Itoa(j.every),
		"--log-every", "1", "--eval-samples", "64", "--timeout", j.timeout.String(), "--out", out}
}

// env is the environment of a setup's runs.
func (s setup) env() []string {
	if s.transport == "tcp" {
		return []string{"SSF_SHM=off"}
	}
	return nil
}

// ctxDone reports whether ctx has ended.
func ctxDone(ctx context.Context) bool { return ctx.Err() != nil }
