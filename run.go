package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ssfusion/ssfusion/experiments"
	"github.com/ssfusion/ssfusion/trainer"
)

func newRunCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run EXPERIMENT.yaml",
		Short: "Run an experiment: one training per cell of its matrix, then a report and plots",
		Long: `Expand the experiment file's matrix and train every cell, one after another, each as
its own training (with the cell's --workers processes), writing
<results>/<experiment>/<cell>/summary.json, metrics.csv and train.log, then
<results>/<experiment>/report.md and its PNG plots.

Cells whose summary.json says the training finished are skipped, and a cell that was
interrupted resumes from its last checkpoint (checkpoint-every in the experiment), so
running an experiment again only runs what is missing; --force reruns everything.`,
		Args: usageArgs(cobra.ExactArgs(1)),
	}
	results := cmd.Flags().String("results", "results", "folder that receives the experiment's folder")
	force := cmd.Flags().Bool("force", false, "rerun every cell from scratch, finished or not")
	dataDir := cmd.Flags().String("data-dir", "", "folder holding the data set's files, for every cell (overrides the experiment's data-dir)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		spec, err := experiments.Load(args[0])
		if err != nil {
			return err
		}
		if *dataDir != "" {
			spec.SetBase("data-dir", *dataDir)
		}
		// SSF_* variables reach the cells through their config.yaml, where they are
		// recorded, and the report names them; the trainings themselves do not see them.
		spec.Env = experiments.EnvOverrides(os.Environ())
		if *dataDir != "" {
			delete(spec.Env, "data-dir") // a flag wins over the environment
		}
		cells, err := spec.Expand(*results)
		if err != nil {
			return fmt.Errorf("experiment %s: %w", args[0], err)
		}
		if err := preflight(args[0], cells); err != nil {
			return err
		}
		dir := filepath.Join(*results, spec.Name)
		if err := experiments.SaveSpec(args[0], dir); err != nil {
			return err
		}
		if err := experiments.SaveEnv(dir, spec.Env); err != nil {
			return err
		}
		show := newCellDisplay()
		r := experiments.Runner{Train: show.train, Force: *force, Progress: show.progress}
		ran, err := r.Run(cmd.Context(), cells)
		// The report covers what finished even when a cell failed.
		if rerr := experiments.WriteReport(spec, cells, dir); rerr != nil {
			return errors.Join(err, fmt.Errorf("writing the report: %w", rerr))
		}
		if err != nil {
			return err
		}
		show.logf("experiment %s: %d cells, %d run; report in %s", spec.Name, len(cells), ran, filepath.Join(dir, "report.md"))
		return nil
	}
	return cmd
}

// preflight checks what would otherwise fail only when its cell comes up: every pipeline
// exists and takes its cell's settings, and every data set the cells read is there.
func preflight(path string, cells []experiments.Cell) error {
	checked := map[[2]string]bool{}
	for _, c := range cells {
		if _, ok := pipelines[c.Config.Pipeline]; !ok {
			return fmt.Errorf("experiment %s, cell %s: unknown pipeline %q", path, c.Name, c.Config.Pipeline)
		}
		if err := checkPipeline(c.Config); err != nil {
			return fmt.Errorf("experiment %s, cell %s: %w (exclude: leaves such a combination out)", path, c.Name, err)
		}
		key := [2]string{c.Config.Dataset, c.Config.DataDir}
		if checked[key] {
			continue
		}
		checked[key] = true
		if err := trainer.CheckData(&c.Config); err != nil {
			return fmt.Errorf("experiment %s needs data set %s: %w\n(fetch it with `ssfusion data fetch %s`, or pass the folder with --data-dir)", path, c.Config.Dataset, err, c.Config.Dataset)
		}
	}
	return nil
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
