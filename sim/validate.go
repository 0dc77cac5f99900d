package sim

import (
	"fmt"
	"math"
	"slices"
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
	Model       string  `json:"model,omitempty"`
	Bandwidth   string  `json:"bandwidth,omitempty"` // of the run's emulated links
	Pipeline    string  `json:"pipeline"`
	Workers     int     `json:"workers"`
	MeasuredMS  float64 `json:"measured_ms"`  // mean step time of the run
	PredictedMS float64 `json:"predicted_ms"` // the simulator's, from the run's measured profile
	// ComputeMS is the step's compute in the run's profile (forward, backward, update),
	// measured in the run itself: what the prediction takes as given.
	ComputeMS float64 `json:"compute_ms,omitempty"`
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

// Errors are the rows' relative errors in magnitude, sorted.
func (v *Validation) Errors() []float64 {
	out := make([]float64, len(v.Rows))
	for i, r := range v.Rows {
		out[i] = math.Abs(r.Error())
	}
	slices.Sort(out)
	return out
}

// Quantile is the q-quantile (0 to 1) of the errors in magnitude, the nearest rank.
func (v *Validation) Quantile(q float64) float64 {
	errs := v.Errors()
	if len(errs) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(errs)))) - 1
	return errs[min(max(i, 0), len(errs)-1)]
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
	wide := slices.ContainsFunc(v.Rows, func(r ValidationRow) bool { return r.Model != "" })
	if wide {
		b.WriteString("| model | bandwidth | pipeline | workers | measured ms/step | predicted ms/step | of it compute | error |\n|---|---|---|---|---|---|---|---|\n")
	} else {
		b.WriteString("| pipeline | workers | measured ms/step | predicted ms/step | error |\n|---|---|---|---|---|\n")
	}
	for _, r := range v.Rows {
		mark := ""
		if math.Abs(r.Error()) > v.Tolerance {
			mark = " **over**"
		}
		if r.Remeasured {
			mark += " (measured twice: the first run missed)"
		}
		if wide {
			fmt.Fprintf(&b, "| %s | %s | %s | %d | %.1f | %.1f | %.1f | %+.1f%%%s |\n", r.Model, r.Bandwidth, r.Pipeline, r.Workers,
				r.MeasuredMS, r.PredictedMS, r.ComputeMS, 100*r.Error(), mark)
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f | %.1f | %+.1f%%%s |\n", r.Pipeline, r.Workers, r.MeasuredMS, r.PredictedMS, 100*r.Error(), mark)
	}
	fmt.Fprintf(&b, "\nLargest error %.1f%% (tolerance %.0f%%).", 100*v.Worst(), 100*v.Tolerance)
	if len(v.Rows) >= 10 {
		fmt.Fprintf(&b, " Errors in magnitude over %d runs: median %.1f%%, 90th percentile %.1f%%, largest %.1f%%.",
			len(v.Rows), 100*v.Quantile(0.5), 100*v.Quantile(0.9), 100*v.Worst())
		b.WriteString(v.by("workers", func(r ValidationRow) string { return fmt.Sprintf("%d workers", r.Workers) }))
		b.WriteString(v.by("model", func(r ValidationRow) string { return r.Model }))
		b.WriteString(v.by("link", func(r ValidationRow) string { return r.Bandwidth }))
	}
	b.WriteString("\n\n")
	return b.String()
}

// by writes the median and largest error of the rows of each value of key, in order of
// first appearance, or nothing when all rows share one value.
func (v *Validation) by(what string, key func(ValidationRow) string) string {
	var values []string
	for _, r := range v.Rows {
		if k := key(r); !slices.Contains(values, k) {
			values = append(values, k)
		}
	}
	if len(values) < 2 {
		return ""
	}
	var parts []string
	for _, k := range values {
		sub := &Validation{Rows: slices.DeleteFunc(slices.Clone(v.Rows), func(r ValidationRow) bool { return key(r) != k })}
		parts = append(parts, fmt.Sprintf("%s %.1f%% and %.1f%%", k, 100*sub.Quantile(0.5), 100*sub.Worst()))
	}
	return fmt.Sprintf(" Median and largest by %s: %s.", what, strings.Join(parts, "; "))
}
