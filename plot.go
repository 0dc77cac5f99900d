package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ssfusion/ssfusion/experiments"
)

func newPlotCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "plot RESULTS/EXPERIMENT",
		Short: "Redraw an experiment's report and plots from its cells' summaries and CSVs",
		Long: `Rewrite report.md and the PNG plots of an experiment that the run command wrote,
from the summary.json and metrics.csv files of its cells (for instance after a
cell was rerun, or after copying the results from another machine). Nothing is
trained.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, cells, err := experiments.LoadResults(args[0])
			if err != nil {
				return err
			}
			if err := experiments.WriteReport(spec, cells, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s and its plots\n", filepath.Join(args[0], "report.md"))
			return nil
		},
	}
}
