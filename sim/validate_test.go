package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/experiments"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/trainer"
)

func TestValidation(t *testing.T) {
	v := &Validation{Setting: "here", Tolerance: 0.15, Rows: []ValidationRow{
		{Pipeline: "dense", Workers: 2, MeasuredMS: 100, PredictedMS: 110},
		{Pipeline: "exdyna", Workers: 4, MeasuredMS: 100, PredictedMS: 80, Remeasured: true},
	}}
	if e := v.Rows[0].Error(); math.Abs(e-0.1) > 1e-12 {
		t.Errorf("error %g, want +0.1", e)
	}
	if w := v.Worst(); math.Abs(w-0.2) > 1e-12 {
		t.Errorf("worst %g, want 0.2", w)
	}
	err := v.Check()
	if err == nil || !strings.Contains(err.Error(), "exdyna at 4 workers") || strings.Contains(err.Error(), "dense") {
		t.Errorf("Check: %v, want an error naming exdyna at 4 workers alone", err)
	}
	md := v.Markdown()
	for _, want := range []string{"| dense | 2 | 100.0 | 110.0 | +10.0% |", "-20.0% **over** (measured twice", "Largest error 20.0% (tolerance 15%)"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	v.Tolerance = 0.25
	if err := v.Check(); err != nil {
		t.Errorf("within 25%%: %v", err)
	}
	if e := (ValidationRow{PredictedMS: 1}).Error(); !math.IsInf(e, 1) {
		t.Errorf("error of a run measured at 0 ms: %g", e)
	}
}

// TestValidatorRemeasuresMisses: cells whose prediction misses are trained again, from
// scratch, and predicted again; the others are trained once. The runs here are faked: a
// run writes the tiny profile and a summary whose step time is what the test wants.
func TestValidatorRemeasuresMisses(t *testing.T) {
	var cells []experiments.Cell
	for i, name := range []string{"dense", "pertensor"} {
		cfg := trainer.Defaults()
		cfg.Pipeline, cfg.Workers, cfg.Density, cfg.Bandwidth = name, 2, sparse.Density, "60Mbit"
		cfg.Out = filepath.Join(t.TempDir(), fmt.Sprint(i))
		cells = append(cells, experiments.Cell{Name: name, Config: cfg})
	}
	v := &Validator{Selection: DefaultSelectionModel(), Tolerance: 0.15,
		Build: func(cfg *trainer.Config, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
			return factories[cfg.Pipeline](comm, tensors)
		},
	}
	// What the simulator predicts for each cell, from the profile the fake runs write.
	predicted := map[string]float64{}
	for _, c := range cells {
		path := filepath.Join(t.TempDir(), "profile.json")
		if err := tinyProfile().Save(path); err != nil {
			t.Fatal(err)
		}
		c.Config.ProfileOut = path
		row, _, err := v.Predict(context.Background(), &c.Config, &trainer.Summary{})
		if err != nil {
			t.Fatal(err)
		}
		predicted[c.Name] = row.PredictedMS
	}
	// The first training of pertensor is 50% slower than predicted, the second on time.
	trained := map[string][]bool{} // by cell: force, per training
	v.Train = func(cells []experiments.Cell, force bool) error {
		for _, c := range cells {
			trained[c.Name] = append(trained[c.Name], force)
			measured := predicted[c.Name]
			if c.Name == "pertensor" && !force {
				measured *= 1.5
			}
			if c.Config.ProfileOut != filepath.Join(c.Config.Out, "profile.json") {
				t.Errorf("%s: profile written to %q", c.Name, c.Config.ProfileOut)
			}
			if err := os.MkdirAll(c.Config.Out, 0o755); err != nil {
				return err
			}
			if err := tinyProfile().Save(c.Config.ProfileOut); err != nil {
				return err
			}
			sum := trainer.Summary{Steps: 30, Throughput: trainer.Throughput{StepMS: trainer.StepMS{Total: measured}}}
			data, err := json.Marshal(sum)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(c.Config.Out, "summary.json"), data, 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	val, err := v.Validate(context.Background(), cells)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(trained["dense"], []bool{false}) || !slices.Equal(trained["pertensor"], []bool{false, true}) {
		t.Errorf("trainings (force flags) by cell: %v, want dense once, pertensor again with force", trained)
	}
	if len(val.Rows) != 2 || val.Rows[0].Remeasured || !val.Rows[1].Remeasured {
		t.Fatalf("rows %+v, want dense measured once and pertensor twice", val.Rows)
	}
	if err := val.Check(); err != nil {
		t.Errorf("after the second measurement: %v", err)
	}
	if !strings.Contains(val.Setting, "60Mbit") {
		t.Errorf("setting %q does not name the emulated link", val.Setting)
	}
}
