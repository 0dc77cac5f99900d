// Command ssfusion trains deep learning models data-parallel with the gradient pipelines this
// project reproduces (dense, per-tensor and multi-tensor sparsification, SSFusion, ...) and
// compares them side by side.
//
//	go run . train --model resnet20 --dataset mnist --max-steps 200
//
// Every flag of `train` is also a key of a --config YAML file and an SSF_* environment variable
// (SSF_BATCH_SIZE for --batch-size); flags win over the environment, the environment over the
// file.
//
// Exit codes: 0 done, 1 failed, 2 the command line is wrong (an unknown command or flag, a
// missing argument, an invalid configuration value), 130 interrupted (SIGINT or SIGTERM:
// the command stops at its next step and writes what it measured; a second signal ends it
// at once).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/ssfusion/ssfusion/internal/faults"
	"github.com/ssfusion/ssfusion/internal/provenance"
	"github.com/ssfusion/ssfusion/nets"
)

// Exit codes, as shells and schedulers read them.
const (
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130 // 128 + SIGINT, as shells report a job stopped by Ctrl-C
)

func main() {
	ctx, interrupted := interruptible()
	err := newRootCommand().ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
	}
	os.Exit(exitCode(err, interrupted()))
}

// exitCode is the process's exit code after a command returned err.
func exitCode(err error, interrupted bool) int {
	var usage *usageError
	switch {
	case interrupted:
		return exitInterrupted
	case err == nil:
		return 0
	case errors.As(err, &usage), strings.HasPrefix(err.Error(), "unknown command "):
		// cobra reports an unknown command with an untyped error of this wording.
		return exitUsage
	}
	return exitFailure
}

// childEnv marks a process this program started (a cell's training, a job's worker).
const childEnv = "SSFUSION_CHILD"

// childEnviron is the environment of a process this program starts: environ, marked.
func childEnviron(environ []string) []string { return append(environ, childEnv+"=1") }

// interruptible returns a context that the first SIGINT or SIGTERM cancels, and whether one
// came. In the process the user started, a second signal ends it at once: the first
// already asked every command to stop at its next step and write what it measured, and
// waiting for that is the user's to cut short. A child process ignores further signals:
// Ctrl-C reaches it from the terminal and again from its parent, which is one request to
// stop, and its parent is there to end it if it does not.
func interruptible() (context.Context, func() bool) {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	child := os.Getenv(childEnv) == "1"
	var got atomic.Bool
	go func() {
		s := <-signals
		got.Store(true)
		if !child {
			fmt.Fprintf(os.Stderr, "\n%v: stopping, writing what was measured (again to quit at once)\n", s)
		}
		cancel()
		for range signals {
			if !child {
				fmt.Fprintln(os.Stderr, "quitting at once")
				os.Exit(exitInterrupted)
			}
		}
	}()
	return ctx, got.Load
}

// usageError is a command line that cannot be run as given.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usage marks err, if any, as a usage error.
func usage(err error) error {
	if err == nil {
		return nil
	}
	return &usageError{err}
}

// usageArgs makes an argument check's errors usage errors.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error { return usage(check(cmd, args)) }
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "ssfusion",
		Short:         "Data-parallel training with sparsified, fused gradient pipelines (SSFusion and rivals)",
		SilenceUsage:  true,
		SilenceErrors: true,
		// A fault-injection plan that does not parse would otherwise arm nothing, silently.
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if err := faults.Check(); err != nil {
				return usage(err)
			}
			return nil
		},
	}
	// --version is ours rather than cobra's so that the provenance, which may ask git, is
	// collected only when it is asked for, not in every worker process.
	version := root.Flags().Bool("version", false, "print the version, source revision and toolchain, and exit")
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		if *version {
			fmt.Fprintln(cmd.OutOrStdout(), "ssfusion", provenance.Collect(nets.GEMMKernel()))
			return nil
		}
		return cmd.Help()
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usage(err) })
	root.AddCommand(newTrainCommand(), newRunCommand(), newPlotCommand(), newSimulateCommand(), newDataCommand(), newPipelinesCommand(), newFiguresCommand())
	return root
}
