// Package validate checks the scale simulator against runs measured on this machine: it
// trains an experiment's cells, each writing the compute profile it measured, replays each
// profile in the simulator with the run's own pipeline and network, and compares the
// predicted step time with the measured one. Run does all of it for an experiment file;
// Validator, given how to train the runs, for cells.
package validate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/experiments"
	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/profile"
	"github.com/ssfusion/ssfusion/sim"
	"github.com/ssfusion/ssfusion/trainer"
)

// A Validator checks the simulator against runs measured on this machine: it trains them,
// each writing the compute profile it measured, predicts each from its profile and
// configuration, with its pipeline built as the trainer built it, and compares the step
// times. How runs are trained is the caller's to say.
type Validator struct {
	Selection sim.SelectionModel
	Tolerance float64 // the largest relative error accepted, e.g. 0.15
	// Train trains cells and returns once all have ended: finished cells are kept, unless
	// force asks for them to be trained again from scratch.
	Train func(cells []experiments.Cell, force bool) error
}

// Validate trains cells (once: finished cells are kept), each writing its profile beside
// its results (it sets their ProfileOut), then predicts each from the profile it measured.
// A shared machine can stall one run; a model that is wrong misses twice. So cells whose
// prediction missed by more than the tolerance are measured once more, from scratch, and
// predicted again; their rows say so.
func (v *Validator) Validate(ctx context.Context, cells []experiments.Cell) (*sim.Validation, error) {
	for i := range cells {
		cells[i].Config.ProfileOut = filepath.Join(cells[i].Config.Out, "profile.json")
	}
	if err := v.Train(cells, false); err != nil {
		return nil, fmt.Errorf("validation runs: %w", err)
	}
	val := &sim.Validation{Tolerance: v.Tolerance, Rows: make([]sim.ValidationRow, len(cells))}
	if err := v.predictCells(ctx, val, cells); err != nil {
		return nil, err
	}
	var again []experiments.Cell
	var rows []int
	for i, row := range val.Rows {
		if math.Abs(row.Error()) > v.Tolerance {
			again, rows = append(again, cells[i]), append(rows, i)
		}
	}
	if len(again) == 0 {
		return val, nil
	}
	if err := v.Train(again, true); err != nil {
		return nil, fmt.Errorf("validation runs: %w", err)
	}
	redo := &sim.Validation{Rows: make([]sim.ValidationRow, len(again))}
	if err := v.predictCells(ctx, redo, again); err != nil {
		return nil, err
	}
	for j, i := range rows {
		val.Rows[i] = redo.Rows[j]
		val.Rows[i].Remeasured = true
	}
	return val, nil
}

// predictCells fills val's rows and setting with the predictions of cells.
func (v *Validator) predictCells(ctx context.Context, val *sim.Validation, cells []experiments.Cell) error {
	settings := map[string]bool{}
	for i, c := range cells {
		row, setting, err := v.predictCell(ctx, c)
		if err != nil {
			return fmt.Errorf("validation cell %s: %w", c.Name, err)
		}
		val.Rows[i], val.Setting = row, setting
		settings[setting] = true
	}
	if len(settings) > 1 {
		val.Setting = "Runs of several models or links (in the table); each prediction replays the profile its run measured, " +
			"on our transport's algorithms over the run's emulated links (no start-up, 8/bandwidth seconds a byte). " +
			"The profile holds the compute the run measured, under whatever contention its workers had: with more " +
			"workers than cores it is slower than alone, and the prediction takes it as measured, so these rows test " +
			"the pipelines' and the network's model, not the compute's."
	}
	return nil
}

// predictCell predicts one measured cell from the summary it wrote.
func (v *Validator) predictCell(ctx context.Context, c experiments.Cell) (sim.ValidationRow, string, error) {
	path := filepath.Join(c.Config.Out, "summary.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return sim.ValidationRow{}, "", err
	}
	var sum trainer.Summary
	if err := json.Unmarshal(data, &sum); err != nil {
		return sim.ValidationRow{}, "", fmt.Errorf("reading %s: %w", path, err)
	}
	return v.Predict(ctx, &c.Config, &sum)
}

// Predict simulates a measured run from the profile it wrote (cfg.ProfileOut) and its
// configuration, on the network its links were emulated as, with ranks that move real data
// as the run's did. It returns the comparison and the setting in words.
func (v *Validator) Predict(ctx context.Context, cfg *trainer.Config, sum *trainer.Summary) (sim.ValidationRow, string, error) {
	prof, err := profile.Load(cfg.ProfileOut)
	if err != nil {
		return sim.ValidationRow{}, "", err
	}
	net, err := emulatedNetwork(cfg)
	if err != nil {
		return sim.ValidationRow{}, "", err
	}
	res, err := sim.Simulate(ctx, sim.Job{
		Profile: prof, Workers: cfg.Workers, Network: net, Selection: v.Selection, Real: true, Seed: 1, Density: cfg.Density,
		Pipeline: func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
			return trainer.NewPipeline(cfg, comm, tensors)
		},
	})
	if err != nil {
		return sim.ValidationRow{}, "", err
	}
	setting := fmt.Sprintf("%s on %s, batch %d per worker, %d steps, links emulated at %s; each prediction replays the profile its run measured, on our transport's algorithms over %s.",
		cfg.Model, cfg.Dataset, cfg.BatchSize, sum.Steps, cfg.Bandwidth, net)
	return sim.ValidationRow{Model: cfg.Model, Bandwidth: cfg.Bandwidth, Pipeline: cfg.Pipeline, Workers: cfg.Workers,
		MeasuredMS: sum.Throughput.StepMS.Total, PredictedMS: res.IterationMS, ComputeMS: res.ComputeMS}, setting, nil
}

// emulatedNetwork is the cost model of a run's emulated links: what our transport does
// over links of their bandwidth and latency.
func emulatedNetwork(cfg *trainer.Config) (netmodel.Network, error) {
	cable, err := netmodel.ParseCable(cfg.Bandwidth, cfg.Latency)
	if err != nil {
		return netmodel.Network{}, fmt.Errorf("the run's link: %w", err)
	}
	if !cable.Shaped() {
		return netmodel.Network{}, errors.New("the validation runs need an emulated bandwidth")
	}
	return cable.Network(), nil
}
