package main

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/internal/provenance"
	"github.com/ssfusion/ssfusion/nets"
	"github.com/ssfusion/ssfusion/pipelines"
	"github.com/ssfusion/ssfusion/profile"
	"github.com/ssfusion/ssfusion/sim"
	"github.com/ssfusion/ssfusion/sim/validate"
	"github.com/ssfusion/ssfusion/trainer"
)

// BenchmarkSimulatorPredictsMeasuredRuns is the simulator's validation as a benchmark:
// every pipeline trains at 2 and 4 workers on emulated 60 Mbit/s links, writing its compute
// profile, and the simulator, replaying that profile, predicts the mean step time. It
// reports each prediction's error and the largest; simulate's own validation holds them to
// its --tolerance. The ranks are goroutines here (simulate's validation trains processes).
//
//	go test -run '^$' -bench SimulatorPredictsMeasuredRuns -benchtime 1x .
func BenchmarkSimulatorPredictsMeasuredRuns(b *testing.B) {
	selection := sim.DefaultSelectionModel()
	for b.Loop() {
		worst := 0.0
		for _, workers := range []int{2, 4} {
			for _, name := range pipelines.Compared() {
				row := measureAndPredict(b, name, workers, selection)
				b.Logf("%s at %d workers: measured %.1f ms, predicted %.1f ms (%+.1f%%)",
					name, workers, row.MeasuredMS, row.PredictedMS, 100*row.Error())
				worst = math.Max(worst, math.Abs(row.Error()))
			}
		}
		b.ReportMetric(100*worst, "worst-error-%")
	}
}

// measureAndPredict trains one validation run and predicts it.
func measureAndPredict(t testing.TB, name string, workers int, selection sim.SelectionModel) sim.ValidationRow {
	t.Helper()
	cfg := trainer.Defaults()
	cfg.Model, cfg.Dataset, cfg.BatchSize, cfg.MaxSteps = "resnet8", "mnist", 32, 30
	cfg.EvalEvery, cfg.EvalSamples, cfg.LogEvery = 1000, 200, 0
	cfg.Pipeline, cfg.Workers, cfg.Backend, cfg.Density, cfg.Bandwidth = name, workers, "inproc", 0.01, "60Mbit"
	cfg.Out = t.TempDir()
	cfg.ProfileOut = filepath.Join(cfg.Out, "profile.json")
	if err := train(context.Background(), cfg); err != nil {
		t.Fatalf("%s at %d workers: %v", name, workers, err)
	}
	sum := readSummary(t, cfg.Out)
	row, _, err := (&validate.Validator{Selection: selection}).Predict(context.Background(), &cfg, &sum)
	if err != nil {
		t.Fatalf("%s at %d workers: %v", name, workers, err)
	}
	return row
}

// runSimulateArgs runs `simulate args...` and returns its error.
func runSimulateArgs(t *testing.T, args ...string) error {
	t.Helper()
	root := newRootCommand()
	root.SetArgs(append([]string{"simulate"}, args...))
	root.SetOut(io.Discard)
	return root.Execute()
}

func TestSimulateRejectsBadFlags(t *testing.T) {
	out := t.TempDir()
	// A profile measured before dimensions were recorded.
	old := filepath.Join(t.TempDir(), "old.json")
	if err := os.WriteFile(old, []byte(`{"model":"old","batch_size":2,"forward_ms":1,"tensors":[{"name":"w","numel":3,"backward_ms":0.5}],"update_ms":0.1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--profile", "resnet9000"}, "resnet9000"},
		{[]string{"--profile", filepath.Join(out, "missing.json")}, "missing.json"},
		{[]string{"--pipelines", "dense,fastest"}, "fastest"},
		{[]string{"--bandwidth", "fast"}, "fast"},
		{[]string{"--workers", "0"}, "--workers"},
		{[]string{"--allreduce", "butterfly"}, "butterfly"},
		{[]string{"--speed", "0"}, "speed"},
		{[]string{"--selection-speed", "-1"}, "selection-speed"},
		{[]string{"--selection-speed", "+Inf"}, "selection-speed"},
		{[]string{"--selection", "tpu"}, "--selection: unknown selection model \"tpu\""},
		{[]string{"--selection", ""}, "--selection"},
		{[]string{"--selection", "GPU"}, "GPU"},
		{[]string{"--density", "2"}, "density"},
		{[]string{"--selector", "bogus"}, "bogus"},
		{[]string{"--tolerance", "-1"}, "tolerance"},
		{[]string{"--pipelines", ""}, "nothing to simulate"},
		{[]string{"--gpus-per-node", "8", "--intra-bandwidth", "slow"}, "intra-bandwidth"},
		{[]string{"--select-rule", "largest"}, "largest"},
		{[]string{"--select-rule", "rank", "--profile", "resnet50," + old}, "profile old: pipeline ssfusion: ssfusion: the rank rule needs every tensor's dimensions, and tensor w has none"},
		{[]string{"--pipelines", "exdyna,oktopk", "--selector", "randomk"}, "--selector: none of the pipelines simulated (exdyna, oktopk) reads it"},
		{[]string{"--compare", "x=dense"}, "--compare shapes a map"},
		{[]string{"--model-error", "0.1"}, "--model-error shapes a map"},
		{[]string{"--vary", "speed=1,2"}, `--vary "speed=1,2"`},
		{[]string{"--vary", "bandwidth=1Gbit,2Gbit"}, "--workers: a map takes one worker count"},
		{[]string{"--vary", "bandwidth=1Gbit,2Gbit", "--workers", "8", "--pipelines", "dense,pertensor"}, "must name it"},
		{[]string{"--vary", "bandwidth=1Gbit,2Gbit", "--vary", "latency=1us,2us", "--vary", "workers=2,4"}, "one or two"},
		{[]string{"--vary", "bandwidth=1Gbit,2Gbit", "--workers", "8", "--compare", "x=cupcake", "--pipelines", "dense,ssfusion"}, "cupcake is not among"},
		{[]string{"--vary", "bandwidth=1Gbit,2Gbit", "--model-error", "-1"}, "--model-error"},
		{[]string{"--selection-costs", filepath.Join(out, "nope.json")}, "nope.json"},
		{[]string{"--selection-costs", old}, "selection costs"},
	} {
		err := runSimulateArgs(t, append(tc.args, "--validate=false", "--out", out)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("simulate %v: error %v, want one naming %q", tc.args, err, tc.want)
		}
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("bad flags left %d files in --out", len(entries))
	}
}

// TestSimulateSelectionModels checks that --selection reaches the simulation: per-tensor
// selection of every ResNet-50 tensor takes, per step, what the chosen model predicts for
// the profile's tensors, and the report records the choice.
func TestSimulateSelectionModels(t *testing.T) {
	prof, err := profile.Builtin("resnet50")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, tc := range []struct {
		name  string
		model sim.SelectionModel
	}{
		{"cpu", sim.DefaultSelectionModel()},
		{"gpu", sim.GPUSelectionModel()},
	} {
		out := t.TempDir()
		if err := runSimulateArgs(t, "--validate=false", "--selection", tc.name, "--profile", "resnet50", "--pipelines", "pertensor",
			"--workers", "8", "--bandwidth", "10Gbit", "--steps", "3", "--warmup", "2", "--out", out); err != nil {
			t.Fatalf("--selection %s: %v", tc.name, err)
		}
		rep := readSimulation(t, out)
		if len(rep.Points) != 1 {
			t.Fatalf("--selection %s: %d points, want 1", tc.name, len(rep.Points))
		}
		var want time.Duration
		for _, ten := range prof.Tensors {
			want += tc.model.Time("topk", ten.Numel)
		}
		got[tc.name] = rep.Points[0].SelectionTotalMS
		if wantMS := want.Seconds() * 1e3; math.Abs(got[tc.name]-wantMS) > 0.01*wantMS {
			t.Errorf("--selection %s: per-tensor selection %.3f ms a step, want the model's %.3f ms", tc.name, got[tc.name], wantMS)
		}
		if s := rep.Setting["selection"]; !strings.HasPrefix(s, tc.name+":") {
			t.Errorf("--selection %s: the report records selection %q", tc.name, s)
		}
	}
	if got["cpu"] == got["gpu"] {
		t.Errorf("per-tensor selection took %.3f ms a step under both models", got["cpu"])
	}
}

// readSimulation reads the simulation.json a simulate run wrote into dir.
func readSimulation(t *testing.T, dir string) sim.Report {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "simulation.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep sim.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestSimulateWritesReport runs a small sweep through the command and checks what it wrote.
func TestSimulateWritesReport(t *testing.T) {
	out := t.TempDir()
	if err := runSimulateArgs(t, "--validate=false", "--profile", "resnet50", "--pipelines", "dense,ssfusion",
		"--workers", "8,16", "--bandwidth", "10Gbit", "--steps", "4", "--warmup", "2", "--out", out); err != nil {
		t.Fatal(err)
	}
	rep := readSimulation(t, out)
	if len(rep.Points) != 4 {
		t.Fatalf("%d points, want 2 pipelines x 2 scales", len(rep.Points))
	}
	for _, p := range rep.Points {
		if p.IterationMS < p.ComputeMS || p.SamplesPerS <= 0 || p.Efficiency <= 0 || p.Efficiency > 1 {
			t.Errorf("%s at %d workers: iteration %.1f ms, compute %.1f ms, %.0f samples/s, efficiency %.2f",
				p.Pipeline, p.Workers, p.IterationMS, p.ComputeMS, p.SamplesPerS, p.Efficiency)
		}
	}
	for _, name := range []string{"report.md", "results.csv", "resnet50-10Gbit-throughput.png", "resnet50-10Gbit-efficiency.png", "resnet50-10Gbit-breakdown.png"} {
		if fi, err := os.Stat(filepath.Join(out, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The simulation records the revision that made it, in its data and at its report's top.
	want := provenance.Collect(nets.GEMMKernel()).RevisionText()
	if rep.Revision != want {
		t.Errorf("simulation.json records revision %q, want %q", rep.Revision, want)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil || !strings.Contains(string(md), "Simulated at revision "+want+".") {
		t.Errorf("report.md does not name revision %q: %v", want, err)
	}
}
