// Command ssfusion trains deep learning models data-parallel with the gradient pipelines this
// project reproduces (dense, per-tensor and multi-tensor sparsification, SSFusion, ...) and
// compares them side by side.
//
//	go run . train --model resnet20 --dataset mnist --max-steps 200
//
// Every flag of `train` is also a key of a --config YAML file and an SSF_* environment variable
// (SSF_BATCH_SIZE for --batch-size); flags win over the environment, the environment over the
// file.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		stop()
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "ssfusion",
		Short:         "Data-parallel training with sparsified, fused gradient pipelines (SSFusion and rivals)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newTrainCommand(), newRunCommand(), newPlotCommand(), newSimulateCommand())
	return root
}
