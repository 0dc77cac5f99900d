package main

import (
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/experiments"
	"github.com/ssfusion/ssfusion/nets"
	"github.com/ssfusion/ssfusion/ssfusion"
	"github.com/ssfusion/ssfusion/trainer"
)

// Every shipped experiment file must load, expand into valid cells and name registered
// pipelines; the quickstart must need no download.
func TestShippedExperiments(t *testing.T) {
	files, err := filepath.Glob("experiments/*.yaml")
	if err != nil || len(files) < 8 {
		t.Fatalf("experiment files %v (%v), want the quickstart and the paper-shaped ones", files, err)
	}
	for _, f := range files {
		spec, err := experiments.Load(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		cells, err := spec.Expand(t.TempDir())
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		for _, c := range cells {
			if err := trainer.CheckPipeline(c.Config); err != nil {
				t.Errorf("%s, cell %s: %v", f, c.Name, err)
			}
		}
		if spec.Name == "quickstart" {
			if err := experiments.Preflight(f, cells); err != nil {
				t.Errorf("the quickstart needs something missing: %v", err)
			}
		}
	}
}

// TestSeededExperiment runs, as a user would, an experiment of two seeds and reads its
// report back: one row for the group, whose figures are the mean and sample standard
// deviation of the two cells' summaries, and the plots drawn from them.
func TestSeededExperiment(t *testing.T) {
	dir := t.TempDir()
	experiment := `name: seeded
target: 0.5
base: {model: mlp, dataset: synthetic, workers: 2, backend: inproc, max-steps: 20, eval-every: 10, eval-samples: 256, density: 0.05}
matrix:
  pipeline: [ssfusion]
  seed: [1, 2]
`
	if err := os.WriteFile(filepath.Join(dir, "seeded.yaml"), []byte(experiment), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, out := command(t, dir, "run", "seeded.yaml", "--results", "results")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v; output:\n%s", err, out)
	}
	results := filepath.Join(dir, "results", "seeded")
	var sums [2]trainer.Summary
	for i := range sums {
		sums[i] = readSummary(t, filepath.Join(results, fmt.Sprintf("pipeline-ssfusion_seed-%d", i+1)))
		if !sums[i].Complete || sums[i].Eval.Accuracy == nil || sums[i].Config.Seed != int64(i+1) {
			t.Fatalf("seed %d: complete %v, accuracy %v, seed %d", i+1, sums[i].Complete, sums[i].Eval.Accuracy, sums[i].Config.Seed)
		}
	}
	// The mean and the sample standard deviation of two values.
	meanStd := func(f func(trainer.Summary) float64) (float64, float64) {
		a, b := f(sums[0]), f(sums[1])
		return (a + b) / 2, math.Abs(a-b) / math.Sqrt2
	}
	accMean, accStd := meanStd(func(s trainer.Summary) float64 { return 100 * *s.Eval.Accuracy })
	lossMean, lossStd := meanStd(func(s trainer.Summary) float64 { return *s.FinalLoss })
	spsMean, spsStd := meanStd(func(s trainer.Summary) float64 { return s.Throughput.SamplesPerS })
	raw, err := os.ReadFile(filepath.Join(results, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	report := string(raw)
	for _, want := range []string{
		fmt.Sprintf("| pipeline-ssfusion | n=2 | 20 | %.2f ± %.2f%% |", accMean, accStd),
		fmt.Sprintf("| %.4f ± %.4f |", lossMean, lossStd),
		fmt.Sprintf("| pipeline-ssfusion | n=2 | %.1f ± %.1f |", spsMean, spsStd),
		"| pipeline-ssfusion_seed-1 | 20 |", "| pipeline-ssfusion_seed-2 | 20 |",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	if rows := strings.Count(report, "| pipeline-ssfusion | n=2 |"); rows != 2 {
		t.Errorf("%d group rows, want one in each table:\n%s", rows, report)
	}
	f, err := os.Open(filepath.Join(results, "accuracy-time.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("accuracy-time.png: %v", err)
	}
}

// trafficControlPrefix names the bundles of an equal-traffic control: the rest of the name
// is the density SSFusion was asked for, and the bundle's density must be what SSFusion
// then sends on the cell's model.
const trafficControlPrefix = "ssfusion-traffic-"

// TestEqualTrafficControls holds every shipped equal-traffic control to SSFusion's traffic:
// the density of each ssfusion-traffic-D bundle must be, to the six figures the files give,
// the fraction of the cell's model's gradient elements SSFusion sends at density D with its
// default selection rule.
func TestEqualTrafficControls(t *testing.T) {
	files, err := filepath.Glob("experiments/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	controls := 0
	for _, f := range files {
		spec, err := experiments.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		cells, err := spec.Expand(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cells {
			for _, bundle := range c.Bundles {
				asked, ok := strings.CutPrefix(bundle, trafficControlPrefix)
				if !ok {
					continue
				}
				d, err := strconv.ParseFloat(asked, 64)
				if err != nil {
					t.Fatalf("%s, cell %s: bundle %s does not end in a density: %v", f, c.Name, bundle, err)
				}
				want := ssfusionSentDensity(t, c.Config, d)
				if got := c.Config.Density; math.Abs(got-want) > 5e-7 {
					t.Errorf("%s, cell %s: density %g, but SSFusion sends %.6f of %s's elements at density %g", f, c.Name, got, want, c.Config.Model, d)
				}
				controls++
			}
		}
	}
	if controls == 0 {
		t.Error("no shipped experiment has an equal-traffic control")
	}
}

// ssfusionSentDensity is what SSFusion sends at density on the model of cfg, with its
// default rule and threshold and no planning network, as the controls' cells train.
func ssfusionSentDensity(t *testing.T, cfg trainer.Config, density float64) float64 {
	t.Helper()
	if cfg.SelectRule != "size" || cfg.Bandwidth != "" || cfg.CostBeta != 0 {
		t.Fatalf("the control assumes SSFusion's size rule without a planning network; the cell has rule %q, bandwidth %q", cfg.SelectRule, cfg.Bandwidth)
	}
	if cfg.Dataset != "mnist" && cfg.Dataset != "fashion-mnist" {
		t.Fatalf("the control's data set %s: only 28x28 grey images of 10 classes are modelled here", cfg.Dataset)
	}
	m, err := nets.New(nets.Spec{Arch: cfg.Model, Channels: 1, Height: 28, Width: 28, Classes: 10, BatchSize: cfg.BatchSize, WidthMult: cfg.Width})
	if err != nil {
		t.Fatal(err)
	}
	var sizes, dims []int
	for _, p := range m.Params() {
		sizes, dims = append(sizes, len(p.Grad)), append(dims, len(p.Shape))
	}
	return ssfusion.SentDensity(ssfusion.BySize, sizes, dims, cfg.SelectThreshold, density)
}
