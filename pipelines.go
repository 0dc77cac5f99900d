package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	// The pipelines this program offers: each package registers its own.
	_ "github.com/ssfusion/ssfusion/baselines"
	"github.com/ssfusion/ssfusion/pipelines"
	_ "github.com/ssfusion/ssfusion/ssfusion"
)

func newPipelinesCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "pipelines",
		Short: "List the gradient pipelines, what each does and the options it reads",
		Long: `List every registered gradient pipeline: its name (the value of --pipeline), what it does,
and the options it reads with their defaults. An option a pipeline does not read, set away
from its default, is refused.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return listPipelines(cmd.OutOrStdout()) },
	}
}

// listPipelines writes every registered pipeline, its description and its options.
func listPipelines(w io.Writer) error {
	d := pipelines.DefaultSettings()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, s := range pipelines.Specs() {
		fmt.Fprintf(tw, "%s\t%s\n", s.Name, s.Description)
		for _, key := range s.Reads {
			fmt.Fprintf(tw, "  --%s=%v\t%s\n", key, d.Value(key), pipelines.Usage(key))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
