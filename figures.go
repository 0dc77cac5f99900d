package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ssfusion/ssfusion/experiments"
	"github.com/ssfusion/ssfusion/internal/figures"
)

// quotingFiles are the documents whose figures come from results: the two READMEs, the
// docs and the experiments' analyses.
func quotingFiles() ([]string, error) {
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		return nil, err
	}
	analyses, err := filepath.Glob("results/*/" + experiments.AnalysisFile)
	if err != nil {
		return nil, err
	}
	return append(append([]string{"README.md", "results/README.md"}, docs...), analyses...), nil
}

func newFiguresCommand() *cobra.Command {
	var check bool
	cmd := &cobra.Command{
		Use:   "figures [FILE.md...]",
		Short: "Rewrite the figures the documentation quotes from the result files they come from",
		Long: `Every figure that README.md, results/README.md, docs/*.md and the experiments'
analyses (results/*/analysis.md) quote from a result is
marked with the expression that computes it from the committed files, for example

  <!-- fig %.2f: csv("results/convergence/comparison.csv", "GROUP", "mean") -->98.03<!-- /fig -->

(csv(path, row, column), json(path, query), series(path, key, from, to, column),
cell(path, column, key, value, ...) and rows(path, key, value, ...),
with arithmetic and expr's builtins such as mean and sum between them). This
command recomputes every marked figure and writes it back; with --check it changes
nothing and lists each figure that differs from its source, exiting with status 1.
Run from the repository's root; FILE.md limits it to those files.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			files := args
			if len(files) == 0 {
				var err error
				if files, err = quotingFiles(); err != nil {
					return err
				}
			}
			src := figures.NewSources(".")
			var stale []figures.Figure
			// A file whose sources are missing (an experiment being rerun) leaves the
			// others to be rewritten; its errors are reported at the end.
			var failed []error
			var left []string
			for _, f := range files {
				var got []figures.Figure
				var err error
				if check {
					got, err = src.Check(f)
				} else {
					got, err = src.Update(f)
				}
				if err != nil {
					failed = append(failed, fmt.Errorf("%s: %w", f, err))
					left = append(left, f)
					continue
				}
				stale = append(stale, got...)
			}
			for _, f := range stale {
				fmt.Fprintln(cmd.OutOrStdout(), f)
			}
			if len(failed) > 0 {
				if !check {
					fmt.Fprintf(cmd.OutOrStdout(), "%d figures rewritten in %d files; left as they were: %s\n", len(stale), len(slices.Compact(names(stale))), strings.Join(left, ", "))
				}
				return errors.Join(failed...)
			}
			switch {
			case check && len(stale) > 0:
				return errors.New("figures differ from their sources; run `go run . figures` to rewrite them")
			case !check:
				fmt.Fprintf(cmd.OutOrStdout(), "%d figures rewritten in %d files\n", len(stale), len(slices.Compact(names(stale))))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&check, "check", false, "change nothing; list the figures that differ from their sources and exit with status 1 if any does")
	return cmd
}

func names(figs []figures.Figure) []string {
	out := make([]string, len(figs))
	for i, f := range figs {
		out[i] = f.File
	}
	return out
}
