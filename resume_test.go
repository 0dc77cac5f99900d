package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/trainer"
)

// runInterrupted trains cfg on in-process ranks and stops every rank after step stop, as
// Ctrl-C stops a job.
func runInterrupted(t *testing.T, cfg trainer.Config, stop int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	comms := inproc.New(cfg.Workers)
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for rank, comm := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer comm.Close()
			opts := options(comm, false)
			opts.AfterStep = func(steps int) {
				if steps == stop {
					cancel()
				}
			}
			_, errs[rank] = trainer.Run(ctx, cfg, opts)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err == nil {
		t.Fatalf("the job ran to its end: it was to be interrupted after step %d", stop)
	}
}

// TestResumeAfterInterruption: a data-parallel job stopped after a checkpoint and resumed
// with `train --resume DIR` alone ends with the parameters, evaluation and traffic of a job
// that ran straight through. Each rank's error-feedback residuals (and DGC momenta) must
// come back for that to hold.
func TestResumeAfterInterruption(t *testing.T) {
	for _, tc := range []struct {
		pipeline string
		dgc      bool
		// replans: the pipeline times its steps again after a resume and plans its buffers
		// anew, so its framing bytes may differ although its gradients do not.
		replans bool
		// unaligned runs SAFusion without alignment and with a selector whose counts vary.
		unaligned bool
	}{{"pertensor", false, false, false}, {"multitensor", false, false, false}, {"ssfusion", true, false, false}, {"dense", false, false, false},
		{"safusion", false, true, false}, {"safusion", true, true, true}, {"exdyna", true, false, false}} {
		t.Run(fmt.Sprintf("%s-dgc-%v-unaligned-%v", tc.pipeline, tc.dgc, tc.unaligned), func(t *testing.T) {
			base := trainer.Defaults()
			base.Model, base.Dataset, base.Width, base.MaxSteps = "resnet8", "synthetic", 0.25, 14
			base.Workers, base.BatchSize, base.Backend, base.EvalSamples = 2, 8, "inproc", 64
			base.Pipeline, base.Density, base.SelectThreshold, base.LogEvery = tc.pipeline, 0.05, 100, 0
			base.MomentumCorrection = tc.dgc
			base.DensityWarmupSteps = 6
			var err error
			if base.Settings, err = base.Settings.For(tc.pipeline); err != nil { // the keys it reads
				t.Fatal(err)
			}
			if tc.unaligned {
				base.SAFusionAlign, base.Selector = false, "gaussiank"
			}

			straight := base
			straight.Out = t.TempDir()
			if err := train(context.Background(), straight); err != nil {
				t.Fatal(err)
			}
			want := readSummary(t, straight.Out)

			cfg := base
			cfg.Out, cfg.CheckpointEvery = t.TempDir(), 5
			runInterrupted(t, cfg, 7)
			if !trainer.HasCheckpoint(cfg.Out) {
				t.Fatal("no checkpoint after the interruption")
			}
			resumed, err := loadConfig(flagsFor(t, "--resume", cfg.Out))
			if err != nil {
				t.Fatal(err)
			}
			if resumed.Pipeline != tc.pipeline || resumed.Out != cfg.Out || resumed.Workers != 2 {
				t.Fatalf("--resume alone configured pipeline %s, out %s, %d workers", resumed.Pipeline, resumed.Out, resumed.Workers)
			}
			if err := train(context.Background(), resumed); err != nil {
				t.Fatal(err)
			}
			got := readSummary(t, cfg.Out)
			if !got.Complete || got.Steps != want.Steps {
				t.Fatalf("resumed run: complete %v after %d steps, want %d", got.Complete, got.Steps, want.Steps)
			}
			if got.Consistency.ParamChecksum != want.Consistency.ParamChecksum {
				t.Errorf("resumed job ends with checksum %s, uninterrupted %s", got.Consistency.ParamChecksum, want.Consistency.ParamChecksum)
			}
			sameBytes := *got.Traffic.BytesSentPerStep == *want.Traffic.BytesSentPerStep
			if *got.Eval.Loss != *want.Eval.Loss || (!sameBytes && !tc.replans) {
				t.Errorf("resumed: eval loss %v, %v bytes per step; uninterrupted %v, %v",
					*got.Eval.Loss, *got.Traffic.BytesSentPerStep, *want.Eval.Loss, *want.Traffic.BytesSentPerStep)
			}
		})
	}
}

// TestResumeSharesTheWorldAmongNodes: a checkpoint records the job's world; resumed by
// one launcher of several nodes, each starts its share of it, and a world the nodes cannot
// share evenly is a usage error that says what to give.
func TestResumeSharesTheWorldAmongNodes(t *testing.T) {
	cfg := trainer.Defaults()
	cfg.Model, cfg.Dataset, cfg.Workers = "mlp", "synthetic", 4
	dir := t.TempDir()
	manifest, err := trainer.CheckpointManifest(cfg, 10, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "checkpoint"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checkpoint", "latest.json"), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		nodes   int
		workers int    // per node
		err     string // empty: no error
	}{{1, 4, ""}, {2, 2, ""}, {4, 1, ""}, {3, 0, "cannot share evenly: give --workers"}} {
		v := viper.New()
		v.Set("resume", dir)
		flags := pflag.NewFlagSet("train", pflag.ContinueOnError)
		flags.String("config", "", "")
		flags.String("out", "", "")
		flags.Int("workers", 1, "")
		flags.Int("nnodes", 1, "")
		if err := flags.Parse([]string{"--nnodes", strconv.Itoa(tc.nodes)}); err != nil {
			t.Fatal(err)
		}
		err := resumeDefaults(v, flags)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%d nodes: %v, want an error saying %q", tc.nodes, err, tc.err)
			}
		case err != nil:
			t.Errorf("%d nodes: %v", tc.nodes, err)
		case v.GetInt("workers") != tc.workers:
			t.Errorf("%d nodes: %d workers each, want %d", tc.nodes, v.GetInt("workers"), tc.workers)
		}
	}
}
