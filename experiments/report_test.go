package experiments

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/baselines"
	"github.com/ssfusion/ssfusion/internal/provenance"
	"github.com/ssfusion/ssfusion/trainer"
)

func TestReport(t *testing.T) {
	dir := t.TempDir()
	s, err := Parse([]byte("name: cmp\ndescription: two pipelines\ntarget: 0.9\nbase: {workers: 2, bandwidth: 10Mbit}\nmatrix: {pipeline: [dense, multitensor, ssfusion]}"))
	if err != nil {
		t.Fatal(err)
	}
	cells, err := s.Expand(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := func(v float64) *float64 { return &v }
	yes := true
	put := func(c Cell, sum trainer.Summary) {
		sum.Config, sum.ResultsVersion = c.Config, trainer.ResultsVersion
		raw, err := json.Marshal(sum)
		if err != nil {
			t.Fatal(err)
		}
		writeSummary(t, c.Config.Out, raw)
	}
	put(cells[0], trainer.Summary{Complete: true, Steps: 300, Workers: 2, WallSeconds: 130, FinalLoss: f(0.0375), Eval: trainer.Eval{Accuracy: f(0.9888)},
		Throughput:  trainer.Throughput{SamplesPerS: 43, StepMS: trainer.StepMS{Total: 1488, Compute: 587, Comm: 900, Wait: 900}},
		Traffic:     trainer.Traffic{BytesSentPerStep: f(1633309)},
		Consistency: trainer.Consistency{ParamChecksumEqual: &yes},
		Provenance: provenance.Info{Revision: "abc123", Modified: true, GoVersion: "go1.26.8", OS: "linux", Arch: "amd64",
			CPU: "Some CPU", GEMM: "avx2 assembly", GOMAXPROCS: 2}})
	put(cells[1], trainer.Summary{Complete: false, Steps: 120, Workers: 2, WallSeconds: 30.5, Eval: trainer.Eval{Accuracy: f(0.5)},
		Throughput: trainer.Throughput{SamplesPerS: 86},
		Traffic:    trainer.Traffic{BytesSentPerStep: f(22366)},
		Sparsity:   trainer.Sparsity{DensityAchieved: f(0.01), TensorsMissingPerStep: f(20.6), PartitionImbalance: f(1.234)},
		Extra:      map[string]float64{baselines.ExDynaIndexBytes: 1000, baselines.ExDynaAuthorsIndexBytes: 2500}})
	// Evaluations: dense reaches the 90% target at 40 s, multi-tensor never does.
	writeMetrics(t, cells[0].Config.Out, "eval,100,1,40,,,,,,,,,,,,,0.91,0.3,\neval,300,3,120,,,,,,,,,,,,,0.9888,0.04,\n")
	writeMetrics(t, cells[1].Config.Out, "eval,100,1,20,,,,,,,,,,,,,0.6,1,\neval,120,1.2,25,,,,,,,,,,,,,0.5,1.2,\n")
	// The ssfusion cell's folder holds results of another learning rate: stale, not shown.
	stale := cells[2].Config
	stale.LR = 0.5
	raw, err := json.Marshal(trainer.Summary{Config: stale, Complete: true, Steps: 300, ResultsVersion: trainer.ResultsVersion})
	if err != nil {
		t.Fatal(err)
	}
	writeSummary(t, cells[2].Config.Out, raw)
	// The dense cell drew a step timeline.
	if err := os.WriteFile(filepath.Join(cells[0].Config.Out, "timeline.png"), []byte("png"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "cmp")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, AnalysisFile), []byte("# what it shows\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteReport(s, cells, out); err != nil {
		t.Fatal(err)
	}
	raw, err = os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(raw)
	for _, want := range []string{
		"# cmp\n\nWhat these results show, and why: [analysis.md](analysis.md).", "two pipelines",
		"**Mixed revisions**: the cells ran at 2 revisions: abc123 (modified) (1 cell), unrecorded (1 cell).",
		"- dense (2 workers, link 10Mbit): communication 900 ms, computation 587 ms per step: ratio 1.53",
		"| pipeline-dense | 300 | 98.88% | 98.88% | 0.0375 | 40 s |",
		"| pipeline-multitensor (stopped at step 120) | 120 | 50.00% | 60.00% | - | not reached |",
		"| pipeline-dense | 43.0 | 1.00x | 1488.0, 587.0, 0.0, 900.0, 900.0 | 1.63 MB | - | - | yes |",
		"| pipeline-multitensor (stopped at step 120) | 86.0 | 2.00x |", "22.4 KB | 0.0100 (partition imbalance 1.23) | 20.6 |",
		"| pipeline-ssfusion | not run with these settings: its folder holds results of other ones (lr: 0.5 → 0.1) |",
		"![test accuracy against wall-clock time](accuracy-time.png)",
		"| pipeline-multitensor (stopped at step 120) | 1.0 KB | 2.5 KB | 2.50x |",
		"- 1 cell: revision abc123 (modified), go1.26.8 linux/amd64, Some CPU, GOMAXPROCS 2, matrix products: avx2 assembly",
		"- 1 cell: not recorded",
		"![partition imbalance per step](imbalance.png)",
		"## Step timelines", "![timeline of pipeline-dense](pipeline-dense/timeline.png)",
		"Cost: 2 cells, 3 minutes of training in all (each cell's training wall-clock, summed).",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	for _, png := range []string{"accuracy-time.png", "throughput.png", "traffic.png", "density.png"} {
		if _, err := os.Stat(filepath.Join(out, png)); err != nil {
			t.Errorf("plot missing: %v", err)
		}
	}
	// A summary that is not JSON is an error naming the file.
	writeSummary(t, cells[2].Config.Out, []byte("{"))
	if _, err := Report(s, cells); err == nil || !strings.Contains(err.Error(), "summary.json") {
		t.Errorf("corrupt summary: %v", err)
	}
}

// writeMetrics writes a metrics.csv with the trainer's header and rows into dir.
func writeMetrics(t *testing.T, dir, rows string) {
	t.Helper()
	header := "kind,step,epoch,wall_s,lr,loss,grad_norm,samples,step_ms,compute_ms,sparsify_ms,comm_ms,wait_ms,bytes_sent,density_achieved,tensors_missing,eval_accuracy,eval_loss,eval_perplexity\n"
	train := "train,1,0.01,1,0.1,2.3,1,64,100,50,0,50,50,1000,,,,,\n"
	if err := os.WriteFile(filepath.Join(dir, "metrics.csv"), []byte(header+train+rows), 0o644); err != nil {
		t.Fatal(err)
	}
}
