package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/experiments"
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
			if _, ok := pipelines[c.Config.Pipeline]; !ok {
				t.Errorf("%s, cell %s: unknown pipeline %q", f, c.Name, c.Config.Pipeline)
			}
		}
		if spec.Name == "quickstart" {
			if err := preflight(f, cells); err != nil {
				t.Errorf("the quickstart needs something missing: %v", err)
			}
		}
	}
}

// An experiment whose data set is missing says which files it needs and where to get them,
// before any cell runs.
func TestPreflightNamesMissingData(t *testing.T) {
	spec, err := experiments.Load("experiments/resnet20-cifar10.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec.SetBase("data-dir", t.TempDir())
	cells, err := spec.Expand(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	err = preflight("resnet20-cifar10.yaml", cells)
	for _, want := range []string{"cifar10", "data_batch_1.bin", "https://www.cs.toronto.edu/~kriz/cifar.html", "--data-dir"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to mention %q", err, want)
		}
	}
}
