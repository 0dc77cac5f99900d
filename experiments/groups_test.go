package experiments

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/trainer"
)

func TestStatOf(t *testing.T) {
	for _, tc := range []struct {
		xs        []float64
		mean, std float64 // NaN: none
		text      string
	}{
		{nil, math.NaN(), math.NaN(), "-"},
		{[]float64{5}, 5, math.NaN(), "5.00"},
		{[]float64{2, 2}, 2, 0, "2.00 ± 0.00"},
		{[]float64{1, 2, 3, 4}, 2.5, math.Sqrt(5.0 / 3), "2.50 ± 1.29"}, // n-1: 5/3, not 5/4
		{[]float64{0.9, 0.92, 0.94}, 0.92, 0.02, "0.92 ± 0.02"},
	} {
		s := statOf(tc.xs)
		same := func(a, b float64) bool { return math.IsNaN(a) && math.IsNaN(b) || math.Abs(a-b) < 1e-12 }
		if !same(s.mean, tc.mean) || !same(s.std, tc.std) || s.n != len(tc.xs) {
			t.Errorf("statOf(%v) = %+v, want mean %g, std %g, n %d", tc.xs, s, tc.mean, tc.std, len(tc.xs))
		}
		format := func(v float64) string { return fmt.Sprintf("%.2f", v) }
		if got := s.text(format, format, ""); got != tc.text {
			t.Errorf("statOf(%v) reads %q, want %q", tc.xs, got, tc.text)
		}
	}
}

// TestSeededReport: an experiment that sweeps seed gets a row per group, with the mean and
// sample standard deviation over the seeds that finished, says how many count and how many
// reached the target, and lists every cell after.
func TestSeededReport(t *testing.T) {
	dir := t.TempDir()
	s, err := Parse([]byte("name: seeds\ntarget: 0.9\nbase: {workers: 2, bandwidth: 10Mbit}\nmatrix: {pipeline: [dense, ssfusion], seed: [1, 2, 3]}"))
	if err != nil {
		t.Fatal(err)
	}
	cells, err := s.Expand(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := func(v float64) *float64 { return &v }
	yes := true
	type seed struct {
		complete             bool
		acc, loss, sps, comm float64
		reach                string // the wall time of the evaluation that reached the target; "" for none
	}
	for i, sd := range []seed{
		{true, 0.90, 0.1, 40, 30, "30"}, {true, 0.92, 0.2, 44, 40, "40"}, {true, 0.94, 0.3, 48, 50, "50"},
		// ssfusion: one seed reaches the target, one does not, one stopped early.
		{true, 0.91, 0.2, 88, 10, "20"}, {true, 0.89, 0.3, 92, 10, ""}, {false, 0.5, 1, 100, 10, ""},
	} {
		c := cells[i]
		sum := trainer.Summary{Config: c.Config, ResultsVersion: trainer.ResultsVersion, Complete: sd.complete, Steps: 300, Workers: 2,
			FinalLoss: f(sd.loss), Eval: trainer.Eval{Accuracy: f(sd.acc)},
			Throughput:  trainer.Throughput{SamplesPerS: sd.sps, StepMS: trainer.StepMS{Total: 100, Compute: 50, Comm: sd.comm}},
			Traffic:     trainer.Traffic{BytesSentPerStep: f(1000 * sd.sps)},
			Consistency: trainer.Consistency{ParamChecksumEqual: &yes},
			Extra:       map[string]float64{"allgather_ms": sd.comm}}
		if !sd.complete {
			sum.Steps = 120
		}
		put(t, c, sum)
		evals := fmt.Sprintf("eval,100,1,10,,,,,,,,,,,,,0.5,1,\neval,300,3,60,,,,,,,,,,,,,%g,0.3,\n", sd.acc)
		if sd.reach != "" {
			evals = fmt.Sprintf("eval,100,1,%s,,,,,,,,,,,,,0.9,1,\neval,300,3,60,,,,,,,,,,,,,%g,0.3,\n", sd.reach, sd.acc)
		}
		writeMetrics(t, c.Config.Out, evals)
	}
	out := filepath.Join(dir, "seeds")
	if err := WriteReport(s, cells, out); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(raw)
	for _, want := range []string{
		"sample standard deviation (n-1)",
		"- dense (2 workers, link 10Mbit, mean of 3 seeds): communication 40 ms, computation 50 ms per step: ratio 0.80",
		"| group | seeds | steps | final test accuracy | best test accuracy | final loss | time to 90.00% |",
		"| pipeline-dense | n=3 | 300 | 92.00 ± 2.00% | 92.00 ± 2.00% | 0.2000 ± 0.1000 | 40 ± 10 s |",
		"| pipeline-ssfusion | n=2 of 3 | 300 | 90.00 ± 1.41% | 90.00 ± 1.41% | 0.2500 ± 0.0707 | 1/2 reached |",
		"| pipeline-dense | n=3 | 44.0 ± 4.0 | 1.00x | 100.0, 50.0, 0.0, 40.0, 0.0 | 44.0 KB | - | - | yes |",
		"| pipeline-ssfusion | n=2 of 3 | 90.0 ± 2.8 | 2.05x | 100.0, 50.0, 0.0, 10.0, 0.0 | 90.0 KB | - | - | yes |",
		"## Pipeline-specific figures", "| group | seeds | allgather_ms |", "| pipeline-dense | n=3 | 40.00 [15.16, 64.84] |", "| pipeline-ssfusion | n=2 of 3 | 10.00 [10.00, 10.00] |",
		"## Per seed", "### Accuracy, per seed",
		"| pipeline-ssfusion_seed-3 (stopped at step 120) | 120 | 50.00% |",
		"| pipeline-ssfusion_seed-2 | 92.0 | 2.09x |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	csv, err := os.ReadFile(filepath.Join(out, "groups.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"group,pipeline,seeds,accuracy,accuracy_ci_low,accuracy_ci_high,perplexity,best,final_loss,samples_per_s,samples_per_s_ci_low,samples_per_s_ci_high,step_ms,",
		",allgather_ms\n",
		"pipeline-dense,dense,3,92,87.03",
		"pipeline-ssfusion,ssfusion,2,90,77.29",
	} {
		if !strings.Contains(string(csv), want) {
			t.Errorf("groups.csv lacks %q:\n%s", want, csv)
		}
	}
	// The groups come before the cells of each seed.
	if strings.Index(md, "| pipeline-dense | n=3 |") > strings.Index(md, "## Per seed") {
		t.Errorf("the groups' tables follow the per-seed ones:\n%s", md)
	}
	for _, png := range []string{"accuracy-time.png", "throughput.png"} {
		if _, err := os.Stat(filepath.Join(out, png)); err != nil {
			t.Errorf("plot missing: %v", err)
		}
	}
}

// put writes sum as the summary.json of c.
func put(t *testing.T, c Cell, sum trainer.Summary) {
	t.Helper()
	raw, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	writeSummary(t, c.Config.Out, raw)
}
