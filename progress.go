package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/ssfusion/ssfusion/experiments"
	"golang.org/x/term"
)

// The progress shown on long work: bars on a terminal, a log line each otherwise.

// jobBar shows a sweep's progress: a bar on a terminal, a line per job otherwise.
type jobBar struct {
	bar  *progressbar.ProgressBar
	what string
}

func newJobBar(jobs int, what string) *jobBar {
	b := &jobBar{what: what}
	if term.IsTerminal(int(os.Stderr.Fd())) {
		b.bar = progressbar.NewOptions(jobs, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetItsString("job"),
			progressbar.OptionShowCount(), progressbar.OptionSetElapsedTime(true), progressbar.OptionSetWidth(20),
			progressbar.OptionThrottle(200*time.Millisecond))
	}
	return b
}

func (b *jobBar) progress(done, total int, job string) {
	if b.bar == nil {
		fmt.Fprintf(os.Stderr, "%s %d/%d done: %s\n", b.what, done, total, job)
		return
	}
	b.bar.Set(done)
	b.bar.Describe(job)
}

func (b *jobBar) finish() {
	if b.bar != nil {
		b.bar.Finish()
		fmt.Fprintln(os.Stderr)
	}
}

// cellDisplay shows an experiment's progress: a log line as each cell starts and ends and,
// on a terminal, the running training's own progress bar, which the training draws on the
// terminal handed to it; elsewhere the trainings' log lines. Each cell's output is kept in
// its train.log either way.
type cellDisplay struct {
	terminal *os.File // nil when stderr is not a terminal
	logf     func(string, ...any)
	cell     string
}

func newCellDisplay() *cellDisplay {
	d := &cellDisplay{logf: log.New(os.Stderr, "", log.LstdFlags).Printf}
	if term.IsTerminal(int(os.Stderr.Fd())) {
		d.terminal = os.Stderr
	}
	return d
}

func (d *cellDisplay) progress(i, n int, c experiments.Cell, a experiments.Action, changed []string) {
	d.cell = fmt.Sprintf("%d/%d %s", i+1, n, c.Name)
	msg := map[experiments.Action]string{
		experiments.Start:  "",
		experiments.Resume: " (resuming from its checkpoint)",
		experiments.Skip:   ": finished earlier, skipped",
		experiments.Rerun:  fmt.Sprintf(": its earlier results came from other settings (%s), training it again", strings.Join(changed, "; ")),
	}[a]
	d.logf("cell %s%s", d.cell, msg)
}

// train trains one cell in a child process of this program, as `train --config` with the
// cell's configuration, so that each cell starts from a clean process and launches its own
// workers.
func (d *cellDisplay) train(ctx context.Context, cell experiments.Cell, resume bool) error {
	dir := cell.Config.Out
	path := filepath.Join(dir, "config.yaml")
	if err := experiments.WriteConfig(cell.Config, path); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program to start the training: %w", err)
	}
	args := []string{"train", "--config", path}
	if resume {
		args = append(args, "--resume", dir)
	}
	logPath := filepath.Join(dir, "train.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening the cell's log: %w", err)
	}
	defer logFile.Close()
	c := exec.CommandContext(ctx, self, args...)
	c.Env = childEnviron(experiments.WithoutOverrides(os.Environ()))
	c.Stdout, c.Stderr = io.MultiWriter(logFile, os.Stderr), io.MultiWriter(logFile, os.Stderr)
	if d.terminal != nil {
		// The training draws its bar on the terminal, found at file descriptor 3; its log
		// lines, which would break the bar, go to train.log only.
		c.Stdout, c.Stderr = logFile, logFile
		c.ExtraFiles = []*os.File{d.terminal}
		c.Env = append(c.Env, progressFDEnv+"=3")
	}
	// On interruption let the training stop as on Ctrl-C, writing what it measured,
	// before it is killed.
	c.Cancel = func() error { return c.Process.Signal(syscall.SIGTERM) }
	c.WaitDelay = 30 * time.Second
	start := time.Now()
	if err := c.Run(); err != nil {
		return fmt.Errorf("training: %w (its output is in %s)", err, logPath)
	}
	d.logf("cell %s: done in %s", d.cell, time.Since(start).Round(time.Second))
	return nil
}

// downloadBar draws a byte-counting bar on a terminal; elsewhere downloads are only logged.
func downloadBar(w io.Writer) func(string, int64, int64) io.WriteCloser {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return func(label string, size, done int64) io.WriteCloser {
		bar := progressbar.NewOptions64(size,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(label),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100e6),
			progressbar.OptionShowCount(),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		)
		bar.Set64(done)
		return barCloser{bar}
	}
}

type barCloser struct{ *progressbar.ProgressBar }

func (b barCloser) Close() error { return b.Finish() }

// progressFDEnv names, in a worker the launcher started, the file descriptor of the
// launcher's terminal, handed to rank 0 for its progress bar.
const progressFDEnv = "SSFUSION_PROGRESS_FD"

// progressTerminal is where the process that logs draws its progress bar: its own stderr
// when that is a terminal, the launcher's terminal when the launcher handed it one, and
// nowhere (nil) otherwise.
func progressTerminal() *os.File {
	if term.IsTerminal(int(os.Stderr.Fd())) {
		return os.Stderr
	}
	fd, err := strconv.Atoi(os.Getenv(progressFDEnv))
	if err != nil || fd < 3 || !term.IsTerminal(fd) {
		return nil
	}
	return os.NewFile(uintptr(fd), "terminal")
}
