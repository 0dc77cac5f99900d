package progress

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"testing"

	"github.com/creack/pty"
	"golang.org/x/term"
)

// A process draws its progress bar only on a terminal: not on a descriptor its parent did
// not hand it, nor on one that is a pipe.
func TestTerminalNeedsATerminal(t *testing.T) {
	if term.IsTerminal(int(os.Stderr.Fd())) {
		t.Skip("the test's stderr is a terminal, on which the bar would rightly go")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, fd := range []string{"", "x", "2", strconv.Itoa(int(w.Fd()))} {
		t.Setenv(FDEnv, fd)
		if f := Terminal(); f != nil {
			t.Errorf("%s=%q: progress on %s, want none (the test's stderr is no terminal either)", FDEnv, fd, f.Name())
		}
	}
	if f := StderrTerminal(); f != nil {
		t.Errorf("standard error is no terminal, yet the bar goes to %s", f.Name())
	}
}

// TestJobBarWritesALineAJobElsewhere: away from a terminal, the start and each job done
// are a line.
func TestJobBarWritesALineAJobElsewhere(t *testing.T) {
	var out bytes.Buffer
	b := NewJobBar(&out, 2, "simulation")
	b.Progress(1, 2, "resnet50, 10Gbit, dense, 8 workers")
	b.Progress(2, 2, "resnet50, 10Gbit, dense, 16 workers")
	b.Finish()
	want := "simulation: 2 jobs to run\nsimulation 1/2 done: resnet50, 10Gbit, dense, 8 workers\nsimulation 2/2 done: resnet50, 10Gbit, dense, 16 workers\n"
	if out.String() != want {
		t.Errorf("wrote %q, want %q", out.String(), want)
	}
}

// TestDownloadBarOnlyOnATerminal: a writer that is no terminal gets no bar.
func TestDownloadBarOnlyOnATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, out := range map[string]io.Writer{"a buffer": &bytes.Buffer{}, "a pipe": w} {
		if DownloadBar(out) != nil {
			t.Errorf("%s: a download bar, on no terminal", name)
		}
	}
}

// TestBarsOnATerminal: on a terminal the jobs' bar draws instead of writing lines, and
// each download gets a bar.
func TestBarsOnATerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	b := NewJobBar(tty, 2, "simulation")
	if b.bar == nil {
		t.Error("no bar for the jobs on a terminal")
	}
	newBar := DownloadBar(tty)
	if newBar == nil {
		t.Fatal("no download bar on a terminal")
	}
	if err := newBar("file.gz", 100, 40).Close(); err != nil {
		t.Error(err)
	}
}
