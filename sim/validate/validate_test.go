package validate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "github.com/ssfusion/ssfusion/baselines"
	"github.com/ssfusion/ssfusion/experiments"
	"github.com/ssfusion/ssfusion/profile"
	"github.com/ssfusion/ssfusion/sim"
	"github.com/ssfusion/ssfusion/trainer"
)

func tinyProfile() *profile.Profile {
	p := &profile.Profile{Model: "tiny", BatchSize: 8, ForwardMS: 3, UpdateMS: 1}
	for i, n := range []int{10, 5000, 7, 20000, 300, 64} {
		p.Tensors = append(p.Tensors, profile.Tensor{Name: fmt.Sprintf("t%d", i), Numel: n, BackwardMS: 1 + float64(i)})
	}
	return p
}

// TestValidatorRemeasuresMisses: cells whose prediction misses are trained again, from
// scratch, and predicted again; the others are trained once. The runs here are faked: a
// run writes the tiny profile and a summary whose step time is what the test wants.
func TestValidatorRemeasuresMisses(t *testing.T) {
	var cells []experiments.Cell
	for i, name := range []string{"dense", "pertensor"} {
		cfg := trainer.Defaults()
		cfg.Pipeline, cfg.Workers, cfg.Bandwidth = name, 2, "60Mbit"
		cfg.Out = filepath.Join(t.TempDir(), fmt.Sprint(i))
		cells = append(cells, experiments.Cell{Name: name, Config: cfg})
	}
	v := &Validator{Selection: sim.DefaultSelectionModel(), Tolerance: 0.15}
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
			if err := fakeRun(c.Config, measured); err != nil {
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

// fakeRun writes what a run of cfg would: the tiny profile as the one it measured, and a
// summary of 30 steps that took stepMS each.
func fakeRun(cfg trainer.Config, stepMS float64) error {
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return err
	}
	if err := tinyProfile().Save(cfg.ProfileOut); err != nil {
		return err
	}
	sum := trainer.Summary{Steps: 30, Throughput: trainer.Throughput{StepMS: trainer.StepMS{Total: stepMS}}}
	data, err := json.Marshal(sum)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(cfg.Out, "summary.json"), data, 0o644)
}
