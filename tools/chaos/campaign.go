package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ssfusion/ssfusion/internal/atomicfile"
)

// Verdicts of a trial.
const (
	survived      = "survived"       // the job finished, with the parameters of a run without the fault
	failedCleanly = "failed cleanly" // the job ended with an error naming the rank at fault, nothing lost
	violated      = "violated"       // an invariant broke
)

// outcome is what a trial came to.
type outcome struct {
	trial    trial
	verdict  string
	detect   time.Duration // from the fault to the job's end; 0 when not measured
	problems []string      // the invariants that broke
	note     string
}

// campaign runs trials of job in a folder of its own.
type campaign struct {
	job       job
	dir       string
	reference map[setup]string            // the parameter checksum of a run without faults, by setup
	cells     map[setup]map[string]string // the checksums of an experiment's cells run without faults
	logf      func(format string, args ...any)
}

// checksum runs s's training without faults, once, and returns its parameter checksum.
func (c *campaign) checksum(s setup) (string, error) {
	if sum, ok := c.reference[s]; ok {
		return sum, nil
	}
	dir, err := os.MkdirTemp(c.dir, "reference-")
	if err != nil {
		return "", err
	}
	r, err := start(dir, c.job.bin, c.job.trainArgs(s, "out"), s.env(), "")
	if err != nil {
		return "", err
	}
	if err := r.wait(c.job.trialTime); err != nil || r.exitCode() != 0 {
		return "", fmt.Errorf("the reference run (%s) failed: %v %v\n%s", s, err, r.err, r.output())
	}
	sum, err := finalChecksum(filepath.Join(dir, "out"))
	if err != nil {
		return "", err
	}
	c.reference[s] = sum
	return sum, nil
}

// finalChecksum reads the parameter checksum a finished run recorded.
func finalChecksum(out string) (string, error) {
	data, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		return "", err
	}
	var s struct {
		Complete    bool `json:"complete"`
		Consistency struct {
			ParamChecksum string `json:"param_checksum"`
		} `json:"consistency"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return "", fmt.Errorf("%s: %w", filepath.Join(out, "summary.json"), err)
	}
	if !s.Complete || s.Consistency.ParamChecksum == "" {
		return "", fmt.Errorf("%s: an incomplete run, or no checksum", filepath.Join(out, "summary.json"))
	}
	return s.Consistency.ParamChecksum, nil
}

// run carries out trial t and checks the invariants after it.
func (c *campaign) run(ctx context.Context, t trial) outcome {
	o := outcome{trial: t}
	fail := func(format string, args ...any) { o.problems = append(o.problems, fmt.Sprintf(format, args...)) }
	dir := filepath.Join(c.dir, fmt.Sprintf("trial-%04d", t.id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail("%v", err)
		o.verdict = violated
		return o
	}
	segments, began := shmSegments(), time.Now()
	cleanup, err := c.prepare(t, filepath.Join(dir, "out"))
	if err != nil {
		if errors.Is(err, errUnsupported) {
			o.verdict, o.note = survived, "skipped: "+err.Error()
			return o
		}
		fail("%v", err)
		o.verdict = violated
		return o
	}
	defer cleanup()

	var fatal bool
	switch t.kind {
	case kindRunner:
		fatal = c.runExperiment(t, dir, &o, fail)
	case kindPartition, kindLossy:
		fatal = c.runPartition(t, dir, &o, fail)
	default:
		fatal = c.runTraining(t, dir, &o, fail)
	}
	if extra := outside(dir); len(extra) > 0 {
		fail("files outside the results: %s", strings.Join(extra, ", "))
	}
	if leaked := newSegments(segments); len(leaked) > 0 {
		for i, s := range leaked {
			if info, err := os.Stat(s); err == nil {
				leaked[i] += fmt.Sprintf(" (made %v after the trial started)", info.ModTime().Sub(began).Round(time.Millisecond))
			}
		}
		fail("shared memory segments left in /dev/shm: %s", strings.Join(leaked, ", "))
		for _, s := range leaked {
			os.Remove(strings.Fields(s)[0])
		}
	}
	switch {
	case len(o.problems) > 0:
		o.verdict = violated
	case fatal:
		o.verdict = failedCleanly
	default:
		o.verdict = survived
	}
	return o
}

// runTraining runs the training of t with its fault, reruns it if the fault was fatal, and
// checks that the results end as without the fault. It returns whether the fault failed
// the job.
func (c *campaign) runTraining(t trial, dir string, o *outcome, fail func(string, ...any)) bool {
	want, err := c.checksum(t.setup)
	if err != nil {
		fail("%v", err)
		return false
	}
	out := filepath.Join(dir, "out")
	fatal, detect := c.inject(t, dir, o, fail)
	o.detect = detect

	// Whatever happened, nothing visible may be half-written.
	for _, p := range halfWritten(out) {
		fail("half-written: %s", p)
	}
	if t.kind == kindCorrupt && !fatal {
		fail("the run meant to be killed finished")
	}
	if t.kind == kindCorrupt {
		c.damageAndResume(t, out, fail)
	}
	if t.kind == kindDiskFull {
		if err := growDisk(out); err != nil {
			fail("%v", err)
		}
	}
	// Rerunning continues from what is left and ends where a run without the fault ends.
	if fatal || t.kind == kindCorrupt {
		args := c.job.trainArgs(t.setup, "out")
		if hasCheckpoint(out) {
			args = []string{"train", "--resume", "out", "--timeout", c.job.timeout.String()}
		}
		r, err := start(dir, c.job.bin, args, t.setup.env(), "")
		if err != nil {
			fail("%v", err)
		} else {
			if err := r.wait(c.job.trialTime); err != nil {
				fail("the rerun: %v", err)
			}
			if r.exitCode() != 0 {
				fail("the rerun failed (exit %d):\n%s", r.exitCode(), tail(r.output(), 8))
			}
			if !r.groupGone() {
				fail("processes of the rerun are still running")
			}
		}
	}
	if got, err := finalChecksum(out); err != nil {
		fail("after the trial: %v", err)
	} else if got != want {
		fail("parameters %s at the end, want %s as without the fault", got, want)
	}
	checkRerun(out, fail)
	return fatal
}

// errUnsupported: this machine cannot inject the trial's fault.
var errUnsupported = errors.New("not supported here")

// prepare readies the results folder for t: a small file system for a disk-full trial.
func (c *campaign) prepare(t trial, out string) (func(), error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	if t.kind != kindDiskFull {
		return func() {}, nil
	}
	// Room for the results but not for a checkpoint of the MLP (1.6 MB a rank).
	if err := syscall.Mount("tmpfs", out, "tmpfs", 0, "size=1m"); err != nil {
		return nil, fmt.Errorf("%w: mounting a tmpfs needs privileges (%v)", errUnsupported, err)
	}
	return func() { syscall.Unmount(out, syscall.MNT_DETACH) }, nil
}

// growDisk gives a disk-full trial's file system room again, as an operator would.
func growDisk(out string) error {
	if err := syscall.Mount("tmpfs", out, "tmpfs", syscall.MS_REMOUNT, "size=256m"); err != nil {
		return fmt.Errorf("growing the tmpfs: %w", err)
	}
	return nil
}

// inject runs t's training with its fault and checks how it ended: within the time limit,
// and, if the fault was fatal, with an error naming the rank at fault. It returns whether
// the job failed and the time from the fault to the job's end.
func (c *campaign) inject(t trial, dir string, o *outcome, fail func(string, ...any)) (bool, time.Duration) {
	var env []string
	if t.fault != "" {
		env = append(env, "SSF_FAULT="+t.fault)
	}
	await := ""
	switch t.kind {
	case kindKill, kindStop, kindSlow, kindCorrupt:
		await = fmt.Sprintf("step %d/", t.step)
	}
	r, err := start(dir, c.job.bin, c.job.trainArgs(t.setup, "out"), append(t.setup.env(), env...), await)
	if err != nil {
		fail("%v", err)
		return false, 0
	}
	var struck time.Time
	if await != "" {
		select {
		case <-r.seen:
		case <-r.done:
		case <-time.After(c.job.trialTime):
		}
		struck = time.Now()
		if err := c.strike(t, r); err != nil {
			o.note = err.Error()
		}
	}
	if err := r.wait(c.job.trialTime); err != nil {
		fail("the job: %v", err)
	}
	if t.fault != "" {
		if at, ok := r.firstLine("fault: "); ok {
			struck = at
		} else {
			o.note = "the fault point was not reached"
		}
	}
	detect := time.Duration(0)
	if !struck.IsZero() && r.exitCode() != 0 {
		detect = r.ended.Sub(struck)
	}
	if !r.groupGone() {
		fail("processes of the job are still running after it ended")
		syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	}
	output := r.output()
	if r.exitCode() == 0 {
		return false, detect
	}
	// A failure names the rank at fault (the launcher names each worker that failed, and
	// the survivors name the culprit), except when the file system is full, where every
	// rank may fail alike: then it names what could not be written.
	switch {
	case t.kind == kindDiskFull:
		if !strings.Contains(output, "no space left") {
			fail("the job failed without saying the disk is full:\n%s", tail(output, 6))
		}
	case !strings.Contains(output, fmt.Sprintf("rank %d", t.rank)):
		fail("the job failed without naming rank %d:\n%s", t.rank, tail(output, 6))
	}
	if t.kind == kindSlow {
		fail("a short stall failed the job:\n%s", tail(output, 6))
	}
	return true, detect
}

// strike injects an external fault into the running job r.
func (c *campaign) strike(t trial, r *run) error {
	pid, err := workerPID(r.cmd.Process.Pid, t.rank)
	if err != nil {
		return err
	}
	switch t.kind {
	case kindKill, kindCorrupt:
		return syscall.Kill(pid, syscall.SIGKILL)
	case kindStop:
		// Longer than the timeout: the others must give up on it; the launcher then
		// kills it, stopped as it is.
		return syscall.Kill(pid, syscall.SIGSTOP)
	case kindSlow:
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return err
		}
		time.Sleep(c.job.timeout / 4)
		return syscall.Kill(pid, syscall.SIGCONT)
	}
	return nil
}

// damageAndResume damages one file of the checkpoint in out and checks that resuming from
// it fails with an error naming the file; then it removes the checkpoint, so that the
// rerun starts afresh.
func (c *campaign) damageAndResume(t trial, out string, fail func(string, ...any)) {
	files, _ := filepath.Glob(filepath.Join(out, "checkpoint", "*"))
	slices.Sort(files)
	if len(files) == 0 {
		fail("no checkpoint to damage")
		return
	}
	rng := rand.New(rand.NewPCG(t.seed, uint64(t.id)+1<<32))
	victim := files[rng.IntN(len(files))]
	data, err := os.ReadFile(victim)
	if err != nil || len(data) < 2 {
		fail("reading %s: %v", victim, err)
		return
	}
	if strings.Contains(t.what, "truncated") {
		data = data[:rng.IntN(len(data))]
	} else {
		data[rng.IntN(len(data))] ^= 1 << rng.IntN(8)
	}
	if err := os.WriteFile(victim, data, 0o644); err != nil {
		fail("%v", err)
		return
	}
	dir := filepath.Dir(out)
	r, err := start(dir, c.job.bin, []string{"train", "--resume", "out", "--timeout", c.job.timeout.String()}, t.setup.env(), "")
	if err != nil {
		fail("%v", err)
		return
	}
	if err := r.wait(c.job.trialTime); err != nil {
		fail("resuming from a damaged checkpoint: %v", err)
	}
	output := r.output()
	switch {
	case r.exitCode() == 0:
		fail("resumed from a checkpoint whose %s was damaged", filepath.Base(victim))
	case !strings.Contains(output, filepath.Base(victim)):
		fail("the refusal to resume does not name %s:\n%s", filepath.Base(victim), tail(output, 6))
	}
	if !r.groupGone() {
		fail("processes of the refused resumption are still running")
	}
	os.RemoveAll(filepath.Join(out, "checkpoint"))
}

// checkRerun checks what a rerun left in out: no half-written file, and none of the
// temporary files of interrupted writes, which the rerun clears.
func checkRerun(out string, fail func(string, ...any)) {
	for _, p := range halfWritten(out) {
		fail("half-written after the rerun: %s", p)
	}
	if stale := temporaryFiles(out); len(stale) > 0 {
		fail("temporary files left after the rerun: %s", strings.Join(stale, ", "))
	}
}

// hasCheckpoint reports whether out holds a checkpoint to resume from.
func hasCheckpoint(out string) bool {
	_, err := os.Stat(filepath.Join(out, "checkpoint", "latest.json"))
	return err == nil
}

// halfWritten lists the visible result files under out that do not parse.
func halfWritten(out string) []string {
	var bad []string
	filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || atomicfile.IsTemporary(d.Name()) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			bad = append(bad, path+": "+err.Error())
			return nil
		}
		switch filepath.Ext(path) {
		case ".json":
			if !json.Valid(data) {
				bad = append(bad, path)
			}
		case ".csv":
			if _, err := csv.NewReader(strings.NewReader(string(data))).ReadAll(); err != nil || len(data) == 0 {
				bad = append(bad, path)
			}
		}
		return nil
	})
	return bad
}

// temporaryFiles lists the temporary files of interrupted writes under out.
func temporaryFiles(out string) []string {
	var tmp []string
	filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && atomicfile.IsTemporary(d.Name()) {
			tmp = append(tmp, path)
		}
		return nil
	})
	return tmp
}

// outside lists what a trial left in its folder besides its results.
func outside(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var extra []string
	for _, e := range entries {
		if e.Name() != "out" {
			extra = append(extra, filepath.Join(dir, e.Name()))
		}
	}
	return extra
}

// shmSegments lists the shared memory segments of this project in /dev/shm.
func shmSegments() map[string]bool {
	names, _ := filepath.Glob("/dev/shm/ssfusion-*")
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	return set
}

// newSegments lists the segments that are not in before.
func newSegments(before map[string]bool) []string {
	var leaked []string
	for n := range shmSegments() {
		if !before[n] {
			leaked = append(leaked, n)
		}
	}
	return leaked
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// build compiles the ssfusion command from the module at root into dir.
func build(root, dir string) (string, error) {
	bin := filepath.Join(dir, "ssfusion")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building ssfusion: %v\n%s", err, out)
	}
	return bin, nil
}

// experimentFile writes the experiment of runner trials for setup s into the campaign's
// folder and returns its path.
func (c *campaign) experimentFile(s setup) (string, error) {
	path := filepath.Join(c.dir, fmt.Sprintf("chaos-%s-%d.yaml", s.transport, s.workers))
	spec := fmt.Sprintf("name: chaos\nbase: {model: mlp, dataset: synthetic, workers: %d, max-steps: %d, checkpoint-every: %d, log-every: 1, eval-samples: 64, timeout: %s}\nmatrix: {pipeline: [dense, ssfusion]}\n",
		s.workers, c.job.steps/2, c.job.every, c.job.timeout)
	return path, os.WriteFile(path, []byte(spec), 0o644)
}

// runExperiment runs trial t's experiment with its fault in the runner, checks that the
// runner failed and left nothing half-written, reruns it, and checks that every cell
// ends as in a run without the fault and the report is whole. The runner's crash is
// always fatal, so it returns true.
func (c *campaign) runExperiment(t trial, dir string, o *outcome, fail func(string, ...any)) bool {
	spec, err := c.experimentFile(t.setup)
	if err != nil {
		fail("%v", err)
		return true
	}
	args := []string{"run", spec, "--results", "out"}
	want, err := c.experimentChecksums(t.setup, spec)
	if err != nil {
		fail("%v", err)
		return true
	}
	r, err := start(dir, c.job.bin, args, append(t.setup.env(), "SSF_FAULT="+t.fault), "")
	if err != nil {
		fail("%v", err)
		return true
	}
	if err := r.wait(c.job.trialTime); err != nil {
		fail("the experiment: %v", err)
	}
	if at, ok := r.firstLine("fault: "); ok && r.exitCode() != 0 {
		o.detect = r.ended.Sub(at)
	}
	if r.exitCode() == 0 {
		fail("the experiment finished though its runner crashed:\n%s", tail(r.output(), 6))
	}
	if !r.groupGone() {
		fail("processes of the experiment are still running")
	}
	out := filepath.Join(dir, "out")
	for _, p := range halfWritten(out) {
		fail("half-written: %s", p)
	}
	rerun, err := start(dir, c.job.bin, args, t.setup.env(), "")
	if err != nil {
		fail("%v", err)
		return true
	}
	if err := rerun.wait(c.job.trialTime); err != nil || rerun.exitCode() != 0 {
		fail("the rerun failed (%v, exit %d):\n%s", err, rerun.exitCode(), tail(rerun.output(), 6))
	}
	got, err := cellChecksums(filepath.Join(out, "chaos"))
	if err != nil {
		fail("%v", err)
	}
	for cell, sum := range want {
		if got[cell] != sum {
			fail("cell %s ends with parameters %s, want %s as without the fault", cell, got[cell], sum)
		}
	}
	if report, err := os.ReadFile(filepath.Join(out, "chaos", "report.md")); err != nil || !strings.Contains(string(report), "pipeline-ssfusion") {
		fail("the report after the rerun is missing or incomplete: %v", err)
	}
	checkRerun(out, fail)
	return true
}

// experimentChecksums runs s's experiment without faults, once, and returns its cells'
// parameter checksums.
func (c *campaign) experimentChecksums(s setup, spec string) (map[string]string, error) {
	if sums, ok := c.cells[s]; ok {
		return sums, nil
	}
	dir, err := os.MkdirTemp(c.dir, "reference-")
	if err != nil {
		return nil, err
	}
	r, err := start(dir, c.job.bin, []string{"run", spec, "--results", "out"}, s.env(), "")
	if err != nil {
		return nil, err
	}
	if err := r.wait(c.job.trialTime); err != nil || r.exitCode() != 0 {
		return nil, fmt.Errorf("the reference experiment (%s) failed: %v %v\n%s", s, err, r.err, tail(r.output(), 8))
	}
	sums, err := cellChecksums(filepath.Join(dir, "out", "chaos"))
	if err != nil {
		return nil, err
	}
	if c.cells == nil {
		c.cells = map[setup]map[string]string{}
	}
	c.cells[s] = sums
	return sums, nil
}

// cellChecksums reads the parameter checksum of every cell of an experiment's folder.
func cellChecksums(dir string) (map[string]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	sums := map[string]string{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sum, err := finalChecksum(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		sums[e.Name()] = sum
	}
	if len(sums) == 0 {
		return nil, fmt.Errorf("no cells in %s", dir)
	}
	return sums, nil
}
