package trainer

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// interrupt returns options that cancel the run after step stop, as Ctrl-C would.
func interrupt(stop int) (context.Context, Options) {
	ctx, cancel := context.WithCancel(context.Background())
	return ctx, Options{AfterStep: func(steps int) {
		if steps == stop {
			cancel()
		}
	}}
}

// TestResumeMatchesUninterrupted: a run stopped after a checkpoint and resumed from it ends
// with the parameters, evaluation and per-step losses of a run that went straight through,
// for an image model (data position mid-epoch, momentum) and the LSTM (dropout stream and
// carried hidden state).
func TestResumeMatchesUninterrupted(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(t *testing.T) Config
	}{
		{"mlp", func(t *testing.T) Config {
			cfg := quick(t, "mlp", "synthetic", 20)
			cfg.BatchSize, cfg.EvalEvery = 64, 6
			return cfg
		}},
		{"lstm", func(t *testing.T) Config {
			cfg := quick(t, "lstm", "synthetic-text", 14)
			cfg.Hidden, cfg.SeqLen, cfg.BatchSize, cfg.Layers, cfg.Dropout = 16, 8, 4, 2, 0.3
			return cfg
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			straight := tc.cfg(t)
			want, err := Run(context.Background(), straight, Options{})
			if err != nil {
				t.Fatal(err)
			}
			cfg := tc.cfg(t)
			cfg.CheckpointEvery = 4
			ctx, opts := interrupt(10)
			if _, err := Run(ctx, cfg, opts); !errors.Is(err, context.Canceled) {
				t.Fatalf("interrupted run: %v, want it cancelled", err)
			}
			if !HasCheckpoint(cfg.Out) {
				t.Fatal("no checkpoint left by the interrupted run")
			}
			cfg.Resume = cfg.Out
			got, err := Run(context.Background(), cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Consistency.ParamChecksum != want.Consistency.ParamChecksum {
				t.Errorf("resumed run ends with checksum %s, uninterrupted %s", got.Consistency.ParamChecksum, want.Consistency.ParamChecksum)
			}
			if *got.Eval.Loss != *want.Eval.Loss || got.Steps != want.Steps || *got.FinalLoss != *want.FinalLoss {
				t.Errorf("resumed: steps %d, eval loss %v, final loss %v; uninterrupted: %d, %v, %v",
					got.Steps, *got.Eval.Loss, *got.FinalLoss, want.Steps, *want.Eval.Loss, *want.FinalLoss)
			}
			if a, b := lossColumn(t, cfg.Out), lossColumn(t, straight.Out); !reflect.DeepEqual(a, b) {
				t.Errorf("metrics.csv losses differ:\nresumed       %v\nuninterrupted %v", a, b)
			}
			if _, err := os.Stat(filepath.Join(cfg.Out, checkpointDir)); err == nil {
				t.Errorf("the finished run left its checkpoint folder behind")
			}
		})
	}
}

// lossColumn returns metrics.csv's kind, step and loss columns.
func lossColumn(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "metrics.csv"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Split(line, ",")
		out = append(out, f[0]+" "+f[1]+" "+f[5]+" "+f[17])
	}
	return out
}

// TestResumeErrors: resuming without a checkpoint, or with another run's, names the problem.
func TestResumeErrors(t *testing.T) {
	cfg := quick(t, "mlp", "synthetic", 8)
	cfg.CheckpointEvery = 2
	ctx, opts := interrupt(3)
	if _, err := Run(ctx, cfg, opts); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(c *Config)
		want   string
	}{
		{"no checkpoint", func(c *Config) { c.Resume = t.TempDir() }, "no checkpoint to resume from"},
		{"other seed", func(c *Config) { c.Seed = 9 }, "seed: 1 → 9"},
		{"other model", func(c *Config) { c.Model = "resnet8" }, "model: mlp → resnet8"},
		{"other lr", func(c *Config) { c.LR = 0.5 }, "lr: "},
		{"other length", func(c *Config) { c.MaxSteps = 30 }, "max-steps: 8 → 30"},
		{"other schedule", func(c *Config) { c.Schedule = "step" }, "--resume-changed"},
		{"structural change even when allowed", func(c *Config) { c.Seed, c.ResumeChanged = 9, true }, "seed: 1 → 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			c.Resume = cfg.Out
			c.Out = t.TempDir()
			tc.change(&c)
			_, err := Run(context.Background(), c, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	// Allowed to, a run resumes under a new learning rate and records the change: what the
	// steps before it ran with, and from which step the new settings hold.
	c := cfg
	c.Resume, c.Out, c.LR, c.ResumeChanged = cfg.Out, t.TempDir(), 0.01, true
	sum, err := Run(context.Background(), c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.ConfigChanges) != 1 || sum.ConfigChanges[0].Step != 2 || sum.Config.LR != 0.01 || sum.ConfigChanges[0].Previous.LR == 0.01 ||
		len(sum.ConfigChanges[0].Changed) != 1 || !strings.HasPrefix(sum.ConfigChanges[0].Changed[0], "lr: ") {
		t.Errorf("config changes %+v, config lr %g: want one change of lr at step 2", sum.ConfigChanges, sum.Config.LR)
	}
	// A damaged file, down to one flipped bit in a parameter or in latest.json, is an
	// error naming it, not a panic or a resumption from wrong values.
	files, _ := filepath.Glob(filepath.Join(cfg.Out, checkpointDir, "step-*.gob"))
	if len(files) != 1 {
		t.Fatalf("checkpoint files %v, want exactly one", files)
	}
	latest := filepath.Join(cfg.Out, checkpointDir, checkpointLatest)
	for _, tc := range []struct {
		name, file string
		damage     func([]byte) []byte
	}{
		{"garbage", files[0], func([]byte) []byte { return []byte("garbage") }},
		{"flipped bit", files[0], func(b []byte) []byte { b[len(b)/2] ^= 4; return b }},
		{"truncated", files[0], func(b []byte) []byte { return b[:len(b)-3] }},
		{"flipped bit in latest.json", latest, func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"seed": 1`, `"seed": 3`, 1))
		}},
		// JSON matches keys regardless of case, so this one decodes to the same manifest.
		{"flipped case in latest.json", latest, func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"step"`, `"Step"`, 1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(tc.file, good, 0o644)
			bad := tc.damage(slices.Clone(good))
			if bytes.Equal(bad, good) {
				t.Fatal("the damage changed nothing")
			}
			if err := os.WriteFile(tc.file, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			c := cfg
			c.Resume = cfg.Out
			if _, err := Run(context.Background(), c, Options{}); err == nil || !strings.Contains(err.Error(), tc.file) || !strings.Contains(err.Error(), "damaged") {
				t.Errorf("error %v, want one naming %s as damaged", err, tc.file)
			}
		})
	}
}
