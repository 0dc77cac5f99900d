// Package progress shows the progress of long work: a bar on a terminal, a log line for
// each piece of work elsewhere. It also finds the terminal a process draws on, its own
// standard error or one its parent handed it, since a worker or a cell's training runs
// in a child process whose output goes elsewhere.
package progress

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// FDEnv names, in a child process (a job's rank 0, a cell's training), the file descriptor
// of the terminal its parent handed it for its progress bar.
const FDEnv = "SSFUSION_PROGRESS_FD"

// Terminal is where the process draws its progress bar: its own standard error when that
// is a terminal, the terminal its parent handed it (FDEnv) when it was handed one, and
// nowhere (nil) otherwise.
func Terminal() *os.File {
	if f := StderrTerminal(); f != nil {
		return f
	}
	fd, err := strconv.Atoi(os.Getenv(FDEnv))
	if err != nil || fd < 3 || !term.IsTerminal(fd) {
		return nil
	}
	return os.NewFile(uintptr(fd), "terminal")
}

// StderrTerminal is standard error when it is a terminal, and nil otherwise.
func StderrTerminal() *os.File {
	if isTerminal(os.Stderr) {
		return os.Stderr
	}
	return nil
}

// isTerminal reports whether w is a file open on a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// JobBar shows the progress of a sweep of jobs on w: a bar when w is a terminal; otherwise
// a line when the sweep starts, so that a log shows it under way before its first job
// ends, and a line per job.
type JobBar struct {
	w    io.Writer
	bar  *progressbar.ProgressBar // nil when w is no terminal
	what string
}

// NewJobBar shows the progress of jobs jobs on w; what names them in the lines it writes.
func NewJobBar(w io.Writer, jobs int, what string) *JobBar {
	b := &JobBar{w: w, what: what}
	if isTerminal(w) {
		b.bar = progressbar.NewOptions(jobs, progressbar.OptionSetWriter(w), progressbar.OptionSetItsString("job"),
			progressbar.OptionShowCount(), progressbar.OptionSetElapsedTime(true), progressbar.OptionSetWidth(20),
			progressbar.OptionThrottle(200*time.Millisecond))
	} else {
		fmt.Fprintf(w, "%s: %d jobs to run\n", what, jobs)
	}
	return b
}

// Progress records that done jobs of total are done, job the last of them; it has the
// signature of sim.Sweep's Progress.
func (b *JobBar) Progress(done, total int, job string) {
	if b.bar == nil {
		fmt.Fprintf(b.w, "%s %d/%d done: %s\n", b.what, done, total, job)
		return
	}
	b.bar.Set(done)
	b.bar.Describe(job)
}

// Finish ends the bar, if any, and its line.
func (b *JobBar) Finish() {
	if b.bar != nil {
		b.bar.Finish()
		fmt.Fprintln(b.w)
	}
}

// DownloadBar returns, when w is a terminal, what draws a byte-counting bar on it for each
// download, labelled, of size bytes of which done are already there; it has the signature
// of fetch.Client's NewBar. Elsewhere it returns nil, and downloads are only logged.
func DownloadBar(w io.Writer) func(label string, size, done int64) io.WriteCloser {
	if !isTerminal(w) {
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

// barCloser finishes its bar on Close.
type barCloser struct{ *progressbar.ProgressBar }

func (b barCloser) Close() error { return b.Finish() }
