package experiments

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/trainer"
)

func TestReport(t *testing.T) {
	dir := t.TempDir()
	s, err := Parse([]byte("name: cmp\ndescription: two pipelines\nmatrix: {pipeline: [dense, multitensor, ssfusion]}"))
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
		raw, err := json.Marshal(sum)
		if err != nil {
			t.Fatal(err)
		}
		writeSummary(t, c.Config.Out, raw)
	}
	put(cells[0], trainer.Summary{Complete: true, Steps: 300, FinalLoss: f(0.0375), Eval: trainer.Eval{Accuracy: f(0.9888)},
		Throughput:  trainer.Throughput{SamplesPerS: 43, StepMS: trainer.StepMS{Total: 1488, Compute: 587, Comm: 900, Wait: 900}},
		Traffic:     trainer.Traffic{BytesSentPerStep: f(1633309)},
		Consistency: trainer.Consistency{ParamChecksumEqual: &yes}})
	put(cells[1], trainer.Summary{Complete: false, Steps: 120, Eval: trainer.Eval{Accuracy: f(0.5)},
		Traffic:  trainer.Traffic{BytesSentPerStep: f(22366)},
		Sparsity: trainer.Sparsity{DensityAchieved: f(0.01), TensorsMissingPerStep: f(20.6)}})
	path := filepath.Join(dir, "cmp", "report.md")
	if err := WriteReport(s, cells, path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	md := string(raw)
	for _, want := range []string{
		"# cmp", "two pipelines",
		"| pipeline-dense | 98.88% | 0.0375 | 43.0 | 1488.0, 587.0, 0.0, 900.0, 900.0 | 1.63 MB | - | - | yes |",
		"| pipeline-multitensor (stopped at step 120) | 50.00% |", "22.4 KB | 0.0100 | 20.6 |",
		"| pipeline-ssfusion | not run |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	// A summary that is not JSON is an error naming the file.
	writeSummary(t, cells[2].Config.Out, []byte("{"))
	if _, err := Report(s, cells); err == nil || !strings.Contains(err.Error(), "summary.json") {
		t.Errorf("corrupt summary: %v", err)
	}
}
