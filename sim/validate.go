package sim

import (
	"fmt"
	"math"
	"strings"
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
