package experiments

import (
	"strings"
	"testing"
)

// An experiment whose data set is missing says which files it needs and where to get them,
// before any cell runs.
func TestPreflightNamesMissingData(t *testing.T) {
	spec, err := Load("resnet20-cifar10.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec.SetBase("data-dir", t.TempDir())
	cells, err := spec.Expand(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	err = Preflight("resnet20-cifar10.yaml", cells)
	for _, want := range []string{"cifar10", "data_batch_1.bin", "https://www.cs.toronto.edu/~kriz/cifar.html", "--data-dir"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to mention %q", err, want)
		}
	}
}

// A cell whose pipeline refuses its settings stops the experiment before any cell trains,
// naming the cell, the reason and the way to leave it out.
func TestPreflightRefusesWhatAPipelineRefuses(t *testing.T) {
	for _, tc := range []struct{ matrix, cell, reason string }{
		{"{pipeline: [pertensor, dense], momentum-correction: [true]}", "pipeline-dense_momentum-correction-true", "pipeline dense does not read momentum-correction"},
		{"{pipeline: [pertensor, dense], error-feedback: [false]}", "pipeline-dense_error-feedback-false", "pipeline dense does not read error-feedback"},
		{"{pipeline: [ssfusion, ssfusion-naive], select-rule: [cost]}", "pipeline-ssfusion_select-rule-cost", "network"},
	} {
		spec, err := Parse([]byte("base: {model: mlp, dataset: synthetic}\nmatrix: " + tc.matrix))
		if err != nil {
			t.Fatal(err)
		}
		// Expanding the matrix finds the options a pipeline does not read; building each
		// cell's pipeline, what a pipeline refuses.
		cells, err := spec.Expand(t.TempDir())
		if err == nil {
			err = Preflight("refused.yaml", cells)
		}
		for _, want := range []string{tc.cell, tc.reason, "exclude"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %v, want it to mention %q", tc.matrix, err, want)
			}
		}
	}
}

// A cell that needs nothing missing passes.
func TestPreflightPassesWhatCanRun(t *testing.T) {
	spec, err := Parse([]byte("base: {model: mlp, dataset: synthetic}\nmatrix: {pipeline: [dense, ssfusion]}"))
	if err != nil {
		t.Fatal(err)
	}
	cells, err := spec.Expand(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := Preflight("fine.yaml", cells); err != nil {
		t.Errorf("an experiment that can run: %v", err)
	}
}
