package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/ssfusion/ssfusion/experiments"
)

func newRunCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run EXPERIMENT.yaml",
		Short: "Run an experiment: one training per cell of its matrix",
		Long: `Expand the experiment file's matrix and train every cell, one after another, each as
its own training (with the cell's --workers processes), writing
<results>/<experiment>/<cell>/summary.json and metrics.csv.

Cells whose summary.json says the training finished are skipped, so running an
experiment again only runs what is missing; --force reruns everything.`,
		Args: cobra.ExactArgs(1),
	}
	results := cmd.Flags().String("results", "results", "folder that receives the experiment's folder")
	force := cmd.Flags().Bool("force", false, "rerun cells that already finished")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		spec, err := experiments.Load(args[0])
		if err != nil {
			return err
		}
		cells, err := spec.Expand(*results)
		if err != nil {
			return fmt.Errorf("experiment %s: %w", args[0], err)
		}
		for _, c := range cells {
			if _, ok := pipelines[c.Config.Pipeline]; !ok {
				return fmt.Errorf("experiment %s, cell %s: unknown pipeline %q", args[0], c.Name, c.Config.Pipeline)
			}
		}
		logf := log.New(os.Stderr, "", log.LstdFlags).Printf
		r := experiments.Runner{
			Train: trainCell,
			Force: *force,
			Progress: func(i, n int, c experiments.Cell, skipped bool) {
				if skipped {
					logf("cell %d of %d: %s finished earlier, skipped", i+1, n, c.Name)
				} else {
					logf("cell %d of %d: %s", i+1, n, c.Name)
				}
			},
		}
		ran, err := r.Run(cmd.Context(), cells)
		// The report covers what finished even when a cell failed.
		report := filepath.Join(*results, spec.Name, "report.md")
		if rerr := experiments.WriteReport(spec, cells, report); rerr != nil {
			return errors.Join(err, fmt.Errorf("writing the report: %w", rerr))
		}
		if err != nil {
			return err
		}
		logf("experiment %s: %d cells, %d run; report in %s", spec.Name, len(cells), ran, report)
		return nil
	}
	return cmd
}

// trainCell trains one cell in a child process of this program, as `train --config` with
// the cell's configuration, so that each cell starts from a clean process and launches its
// own workers.
func trainCell(ctx context.Context, cell experiments.Cell) error {
	path := filepath.Join(cell.Config.Out, "config.yaml")
	if err := experiments.WriteConfig(cell.Config, path); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program to start the training: %w", err)
	}
	c := exec.CommandContext(ctx, self, "train", "--config", path)
	c.Stdout, c.Stderr = os.Stdout, os.Stderr
	// On interruption let the training stop as on Ctrl-C, writing what it measured,
	// before it is killed.
	c.Cancel = func() error { return c.Process.Signal(syscall.SIGTERM) }
	c.WaitDelay = 30 * time.Second
	if err := c.Run(); err != nil {
		return fmt.Errorf("training: %w", err)
	}
	return nil
}
