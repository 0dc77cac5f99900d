package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/experiments"
	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/profile"
	"github.com/ssfusion/ssfusion/trainer"
)

// Validation compares the simulator's predictions with runs measured on this machine.
type Validation struct {
	Setting   string          `json:"setting"`   // what was measured, in words
	Tolerance float64         `json:"tolerance"` // the largest relative error accepted, e.g. 0.15
	Rows      []ValidationRow `json:"rows"`
}

// ValidationRow is one measured run and its prediction.
type ValidationRow struct {
	Pipeline    string  `json:"pipeline"`
	Workers     int     `json:"workers"`
	MeasuredMS  float64 `json:"measured_ms"`  // mean step time of the run
	PredictedMS float64 `json:"predicted_ms"` // the simulator's, from the run's measured profile
	// Remeasured says the run was trained a second time because the first missed.
	Remeasured bool `json:"remeasured,omitempty"`
}

// Error is the prediction's relative error, signed: positive when it predicts slower.
func (r ValidationRow) Error() float64 {
	if r.MeasuredMS == 0 {
		return math.Inf(1)
	}
	return (r.PredictedMS - r.MeasuredMS) / r.MeasuredMS
}

// Worst is the largest relative error in magnitude.
func (v *Validation) Worst() float64 {
	worst := 0.0
	for _, r := range v.Rows {
		worst = math.Max(worst, math.Abs(r.Error()))
	}
	return worst
}

// Check reports the rows whose error exceeds the tolerance.
func (v *Validation) Check() error {
	var bad []string
	for _, r := range v.Rows {
		if e := r.Error(); math.Abs(e) > v.Tolerance {
			bad = append(bad, fmt.Sprintf("%s at %d workers: predicted %.1f ms, measured %.1f ms (%+.1f%%)", r.Pipeline, r.Workers, r.PredictedMS, r.MeasuredMS, 100*e))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("sim: %d predictions off by more than %.0f%%: %s", len(bad), 100*v.Tolerance, strings.Join(bad, "; "))
	}
	return nil
}

// Markdown is the validation's section of report.md.
func (v *Validation) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Validation against measured runs\n\n%s\n\n", v.Setting)
	b.WriteString("| pipeline | workers | measured ms/step | predicted ms/step | error |\n|---|---|---|---|---|\n")
	for _, r := range v.Rows {
		mark := ""
		if math.Abs(r.Error()) > v.Tolerance {
			mark = " **over**"
		}
		if r.Remeasured {
			mark += " (measured twice: the first run missed)"
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f | %.1f | %+.1f%%%s |\n", r.Pipeline, r.Workers, r.MeasuredMS, r.PredictedMS, 100*r.Error(), mark)
	}
	fmt.Fprintf(&b, "\nLargest error %.1f%% (tolerance %.0f%%).\n\n", 100*v.Worst(), 100*v.Tolerance)
	return b.String()
}

// A Validator checks the simulator against runs measured on this machine: it trains them,
// each writing the compute profile it measured, predicts each from its profile and
// configuration, and compares the step times. What only the command knows, how a run's
// pipeline is built and how runs are trained, it is given.
type Validator struct {
	Selection SelectionModel
	Tolerance float64 // the largest relative error accepted, e.g. 0.15
	// Build builds the pipeline of a run from its configuration, as the trainer did.
	Build func(cfg *trainer.Config, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error)
	// Train trains cells and returns once all have ended: finished cells are kept, unless
	// force asks for them to be trained again from scratch.
	Train func(cells []experiments.Cell, force bool) error
}

// Validate trains cells (once: finished cells are kept), each writing its profile beside
// its results (it sets their ProfileOut), then predicts each from the profile it measured.
// A shared machine can stall one run; a model that is wrong misses twice. So cells whose
// prediction missed by more than the tolerance are measured once more, from scratch, and
// predicted again; their rows say so.
func (v *Validator) Validate(ctx context.Context, cells []experiments.Cell) (*Validation, error) {
	for i := range cells {
		cells[i].Config.ProfileOut = filepath.Join(cells[i].Config.Out, "profile.json")
	}
	if err := v.Train(cells, false); err != nil {
		return nil, fmt.Errorf("validation runs: %w", err)
	}
	val := &Validation{Tolerance: v.Tolerance, Rows: make([]ValidationRow, len(cells))}
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
	redo := &Validation{Rows: make([]ValidationRow, len(again))}
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
func (v *Validator) predictCells(ctx context.Context, val *Validation, cells []experiments.Cell) error {
	for i, c := range cells {
		row, setting, err := v.predictCell(ctx, c)
		if err != nil {
			return fmt.Errorf("validation cell %s: %w", c.Name, err)
		}
		val.Rows[i], val.Setting = row, setting
	}
	return nil
}

// predictCell predicts one measured cell from the summary it wrote.
func (v *Validator) predictCell(ctx context.Context, c experiments.Cell) (ValidationRow, string, error) {
	path := filepath.Join(c.Config.Out, "summary.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return ValidationRow{}, "", err
	}
	var sum trainer.Summary
	if err := json.Unmarshal(data, &sum); err != nil {
		return ValidationRow{}, "", fmt.Errorf("reading %s: %w", path, err)
	}
	return v.Predict(ctx, &c.Config, &sum)
}

// Predict simulates a measured run from the profile it wrote (cfg.ProfileOut) and its
// configuration, on the network its links were emulated as, with ranks that move real data
// as the run's did. It returns the comparison and the setting in words.
func (v *Validator) Predict(ctx context.Context, cfg *trainer.Config, sum *trainer.Summary) (ValidationRow, string, error) {
	prof, err := profile.Load(cfg.ProfileOut)
	if err != nil {
		return ValidationRow{}, "", err
	}
	net, err := emulatedNetwork(cfg)
	if err != nil {
		return ValidationRow{}, "", err
	}
	res, err := Simulate(ctx, Job{
		Profile: prof, Workers: cfg.Workers, Network: net, Selection: v.Selection, Real: true, Seed: 1, Density: cfg.Density,
		Pipeline: func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
			return v.Build(cfg, comm, tensors)
		},
	})
	if err != nil {
		return ValidationRow{}, "", err
	}
	setting := fmt.Sprintf("%s on %s, batch %d per worker, %d steps, links emulated at %s; each prediction replays the profile its run measured, on our transport's algorithms over %s.",
		cfg.Model, cfg.Dataset, cfg.BatchSize, sum.Steps, cfg.Bandwidth, net)
	return ValidationRow{Pipeline: cfg.Pipeline, Workers: cfg.Workers, MeasuredMS: sum.Throughput.StepMS.Total, PredictedMS: res.IterationMS}, setting, nil
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
