package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ssfusion/ssfusion/experiments"
	"github.com/ssfusion/ssfusion/internal/progress"
)

// cellDisplay shows an experiment's progress: a log line as each cell starts and ends and,
// on a terminal, the running training's own progress bar, which the training draws on the
// terminal handed to it; elsewhere the trainings' log lines. Each cell's output is kept in
// its train.log either way.
type cellDisplay struct {
	terminal *os.File // nil when stderr is not a terminal
	logf     func(string, ...any)
	cell     string
}

// newCellDisplay shows cells on this process's standard error.
func newCellDisplay() *cellDisplay {
	return &cellDisplay{logf: log.New(os.Stderr, "", log.LstdFlags).Printf, terminal: progress.StderrTerminal()}
}

// progress logs the cell the runner comes to and what it does with it, as
// experiments.Runner's Progress.
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
		c.Env = append(c.Env, progress.FDEnv+"=3")
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
