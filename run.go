package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ssfusion/ssfusion/experiments"
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
		if err := experiments.Preflight(args[0], cells); err != nil {
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
