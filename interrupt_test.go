package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/trainer"
)

// mainEnv makes the test binary run main instead of the tests, so that tests can run
// the command as a user would, signals and exit codes included.
const mainEnv = "SSFUSION_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// command starts this program with args in dir.
func command(t *testing.T, dir string, args ...string) (*exec.Cmd, *output) {
	t.Helper()
	cmd, out := unstarted(dir, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}

// unstarted is command before its start, for a test that hands the process files.
func unstarted(dir string, args ...string) (*exec.Cmd, *output) {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	// A group of its own, which the test signals whole, as a terminal's Ctrl-C reaches the
	// command and every process it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := new(output)
	cmd.Stdout, cmd.Stderr = out, out
	return cmd, out
}

// output is what a command printed, safe to read while it runs.
type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// waitFor waits until the command has printed text, and fails the test if it does not
// within limit or exits first.
func (o *output) waitFor(t *testing.T, cmd *exec.Cmd, text string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !strings.Contains(o.String(), text) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no %q after %v; output:\n%s", text, limit, o)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exitCodeOf is the exit code of a finished command.
func exitCodeOf(t *testing.T, err error) int {
	t.Helper()
	var exit *exec.ExitError
	if err == nil {
		return 0
	}
	if !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return exit.ExitCode()
}

// TestInterruptStopsCommands: SIGINT (to the whole process group, as Ctrl-C sends it) or
// SIGTERM (to the command) stops a long command within about two seconds, with exit code
// 130, leaving what it measured (train alone or with worker processes, run and its cell's
// training) and no half-written report (simulate).
func TestInterruptStopsCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the command in child processes")
	}
	experiment := "name: long\nbase: {model: mlp, dataset: synthetic, max-steps: 1000000, eval-every: 1000000, log-every: 1}\nmatrix: {pipeline: [dense]}\n"
	for _, tc := range []struct {
		name   string
		args   []string
		signal syscall.Signal
		// wrote is the file the stopped command leaves; empty: none to check.
		wrote string
		// absent is a file it must not leave.
		absent string
		// under is what the command prints once it is under way.
		under string
	}{
		{"train", []string{"train", "--model", "mlp", "--dataset", "synthetic", "--max-steps", "1000000", "--log-every", "1", "--out", "out"}, syscall.SIGINT, "out/summary.json", "", "step 1/"},
		{"train with workers", []string{"train", "--model", "mlp", "--dataset", "synthetic", "--workers", "2", "--max-steps", "1000000", "--log-every", "1", "--out", "out"}, syscall.SIGINT, "out/summary.json", "", "step 1/"},
		{"run", []string{"run", "long.yaml", "--results", "results"}, syscall.SIGINT, "results/long/pipeline-dense/summary.json", "", "step 1/"},
		{"run, terminated", []string{"run", "long.yaml", "--results", "results"}, syscall.SIGTERM, "results/long/pipeline-dense/summary.json", "", "step 1/"},
		{"simulate", []string{"simulate", "--validate=false", "--profile", "resnet50", "--pipelines", "pertensor", "--workers", "256", "--bandwidth", "10Gbit", "--steps", "100000", "--out", "sim"}, syscall.SIGINT, "", "sim/report.md", "jobs to run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "long.yaml"), []byte(experiment), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd, out := command(t, dir, tc.args...)
			out.waitFor(t, cmd, tc.under, time.Minute)
			sent := time.Now()
			pid := cmd.Process.Pid
			if tc.signal == syscall.SIGINT {
				pid = -pid // the group
			}
			if err := syscall.Kill(pid, tc.signal); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("still running 20 s after the signal; output:\n%s", out)
			}
			took := time.Since(sent)
			if code := exitCodeOf(t, err); code != exitInterrupted {
				t.Fatalf("exit code %d, want %d; output:\n%s", code, exitInterrupted, out)
			}
			// About two seconds; the bound leaves room for a loaded machine.
			if took > 6*time.Second {
				t.Errorf("stopped %v after the signal", took)
			}
			if tc.wrote != "" {
				raw, err := os.ReadFile(filepath.Join(dir, tc.wrote))
				if err != nil {
					t.Fatalf("the stopped command left no %s: %v; output:\n%s", tc.wrote, err, out)
				}
				var sum trainer.Summary
				if err := json.Unmarshal(raw, &sum); err != nil || sum.Complete || sum.Steps == 0 {
					t.Errorf("%s: %v, complete %v after %d steps; want an incomplete run's summary", tc.wrote, err, sum.Complete, sum.Steps)
				}
			}
			if tc.absent != "" {
				if _, err := os.Stat(filepath.Join(dir, tc.absent)); err == nil {
					t.Errorf("the stopped command wrote %s", tc.absent)
				}
			}
		})
	}
}

// TestExitCodes: a command line that cannot run exits 2, a failure 1.
func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"bogus"}, exitUsage},
		{[]string{"train", "--no-such-flag"}, exitUsage},
		{[]string{"train", "--lr", "-5"}, exitUsage},
		{[]string{"train", "--max-steps", "NaN"}, exitUsage},
		{[]string{"plot"}, exitUsage},
		{[]string{"train", "--backend", "carrier-pigeon"}, exitUsage},
		{[]string{"train", "--bandwidth", "fast"}, exitUsage},
		{[]string{"simulate", "--validate=false", "--workers", "0"}, exitUsage},
		{[]string{"simulate", "--validate=false", "--density", "2"}, exitUsage},
		{[]string{"simulate", "--validate=false", "--memory", "lots"}, exitUsage},
		{[]string{"train", "--resume", "/nonexistent"}, exitFailure},
		{[]string{"plot", "/nonexistent"}, exitFailure},
	} {
		cmd, out := command(t, t.TempDir(), tc.args...)
		if code := exitCodeOf(t, cmd.Wait()); code != tc.want {
			t.Errorf("%v: exit code %d, want %d; output:\n%s", tc.args, code, tc.want, out)
		}
	}
}
