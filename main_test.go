package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/ssfusion/ssfusion/experiments"
	"github.com/ssfusion/ssfusion/trainer"
)

func flagsFor(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	cmd := newTrainCommand()
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatal(err)
	}
	return cmd.Flags()
}

func TestConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "run.yaml")
	yaml := "model: vgg11\nbatch-size: 16\nlr: 0.5\nmilestones: [10, 20]\ntimeout: 5s\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSF_BATCH_SIZE", "64")
	t.Setenv("SSF_LR", "0.25")
	cfg, err := loadConfig(flagsFor(t, "--config", file, "--lr", "0.125"))
	if err != nil {
		t.Fatal(err)
	}
	want := trainer.Defaults()
	want.Model = "vgg11" // file
	want.BatchSize = 64  // environment over file
	want.LR = 0.125      // flag over environment
	want.Timeout = 5 * time.Second
	if cfg.Model != want.Model || cfg.BatchSize != want.BatchSize || cfg.LR != want.LR || cfg.Timeout != want.Timeout {
		t.Errorf("got model %s batch %d lr %g timeout %v; want %s %d %g %v",
			cfg.Model, cfg.BatchSize, cfg.LR, cfg.Timeout, want.Model, want.BatchSize, want.LR, want.Timeout)
	}
	if len(cfg.Milestones) != 2 || cfg.Milestones[1] != 20 {
		t.Errorf("milestones from the file: %v, want [10 20]", cfg.Milestones)
	}
	if cfg.Dataset != want.Dataset || cfg.Seed != want.Seed {
		t.Errorf("defaults lost: dataset %q seed %d", cfg.Dataset, cfg.Seed)
	}
}

func TestConfigRejectsUnknownKeys(t *testing.T) {
	file := filepath.Join(t.TempDir(), "run.yaml")
	if err := os.WriteFile(file, []byte("modle: vgg11\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := loadConfig(flagsFor(t, "--config", file))
	if err == nil || !strings.Contains(err.Error(), "modle") {
		t.Fatalf("error %v, want one naming the unknown key modle", err)
	}
}

func TestConfigMissingFile(t *testing.T) {
	_, err := loadConfig(flagsFor(t, "--config", "/nonexistent/run.yaml"))
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/run.yaml") {
		t.Fatalf("error %v, want one naming the file", err)
	}
}

// A cell's configuration written by the run command reads back, through train --config,
// as the same configuration.
func TestCellConfigRoundTrip(t *testing.T) {
	want := trainer.Defaults()
	want.Model, want.Pipeline, want.Workers, want.Density = "vgg11", "ssfusion", 4, 0.05
	want.Milestones, want.Timeout, want.Bandwidth = []float64{1, 2.5}, 90*time.Second, "10Mbit"
	want.MomentumCorrection, want.Out = true, "results/x/y"
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := experiments.WriteConfig(want, path); err != nil {
		t.Fatal(err)
	}
	cmd := newTrainCommand()
	if err := cmd.Flags().Parse([]string{"--config", path}); err != nil {
		t.Fatal(err)
	}
	got, err := loadConfig(cmd.Flags())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read back\n%+v\nwant\n%+v", got, want)
	}
}

// TestConfigRefusesWhatWouldBeSilentlyWrong: values a loose reading would turn into
// something else, or that no range check catches, are errors naming the key.
func TestConfigRefusesWhatWouldBeSilentlyWrong(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		args       []string
		want       string
	}{
		{"fraction of a count", "max-steps: 5.7\n", nil, "max-steps"},
		{"duration without a unit", "timeout: 10\n", nil, "timeout"},
		{"NaN density", "", []string{"--density", "NaN"}, "density"},
		{"NaN fusion size", "", []string{"--fusion-mb", "NaN"}, "fusion-mb"},
		{"NaN momentum", "", []string{"--momentum", "NaN"}, "momentum"},
		{"NaN gamma", "", []string{"--gamma", "NaN"}, "gamma"},
		{"infinite select-ns", "", []string{"--select-ns", "+Inf"}, "select-ns"},
		{"NaN milestone", "milestones: [10, .nan]\n", nil, "milestones"},
		{"negative lr", "", []string{"--lr", "-5"}, "lr"},
		{"negative timeout", "", []string{"--timeout", "-1s"}, "timeout"},
		{"zero timeout", "", []string{"--timeout", "0s"}, "timeout"},
		{"mlp-hidden of another model", "", []string{"--mlp-hidden", "64"}, "mlp-hidden sizes the mlp's layers; model resnet20"},
		{"negative threads", "", []string{"--threads", "-1"}, "threads and compute-threads must not be negative"},
		{"negative compute threads", "compute-threads: -2\n", nil, "compute-threads"},
		{"zero mlp-hidden", "", []string{"--model", "mlp", "--mlp-hidden", "64,0"}, "mlp-hidden sizes must be positive"},
		{"mlp-hidden not a number", "model: mlp\nmlp-hidden: [64, wide]\n", nil, "mlp-hidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.yaml != "" {
				file := filepath.Join(t.TempDir(), "run.yaml")
				if err := os.WriteFile(file, []byte(tc.yaml), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", file)
			}
			cfg, err := loadConfig(flagsFor(t, args...))
			if err == nil {
				cfg.Resolve()
				err = cfg.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
	// The family-default marker still works.
	cfg, err := loadConfig(flagsFor(t, "--lr", "-1", "--momentum", "-1"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Resolve()
	if err := cfg.Validate(); err != nil || cfg.LR != 0.1 || cfg.Momentum != 0.9 {
		t.Fatalf("-1 for lr and momentum: %v, lr %g, momentum %g; want the CNN defaults", err, cfg.LR, cfg.Momentum)
	}
}

// FuzzLoadConfig: whatever a --config file holds, reading it fails with an error or gives a
// configuration that Validate judges, and nothing panics.
func FuzzLoadConfig(f *testing.F) {
	for _, seed := range []string{
		"model: vgg11\nbatch-size: 16\nlr: 0.5\nmilestones: [10, 20]\ntimeout: 5s\n",
		"max-steps: 5.7\n", "timeout: 10\n", "density: .nan\n", "lr: -5\n", "milestones: 1,2,3\n",
		"workers: 99999999999999999999\n", "model: [a, b]\n", "- 1\n- 2\n", "{",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(t.TempDir(), "run.yaml")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := newTrainCommand()
		if err := cmd.Flags().Parse([]string{"--config", file}); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadConfig(cmd.Flags())
		if err != nil {
			return
		}
		cfg.Resolve()
		if cfg.Validate() == nil && (cfg.BatchSize <= 0 || cfg.Timeout <= 0 || !(cfg.Density > 0 && cfg.Density <= 1)) {
			t.Fatalf("Validate accepted %+v", cfg)
		}
	})
}

// --version prints the program's version and toolchain and runs nothing else.
func TestVersionFlag(t *testing.T) {
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"--version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	line := out.String()
	if !strings.HasPrefix(line, "ssfusion ") || !strings.Contains(line, runtime.Version()) || strings.Count(line, "\n") != 1 {
		t.Errorf("--version printed %q, want one line naming the program and %s", line, runtime.Version())
	}
}
