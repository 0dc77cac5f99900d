package sim

import (
	"math"
	"strings"
	"testing"
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

// TestValidationErrorDistribution: a wide validation reports its rows with model and
// bandwidth, and the median, 90th percentile and largest error, overall and by workers.
func TestValidationErrorDistribution(t *testing.T) {
	v := &Validation{Tolerance: 0.15}
	for i := range 10 {
		// errors 1%, 2%, ..., 10%, the odd ones at 8 workers and predicted slow
		e := float64(i+1) / 100
		w := 2
		if i%2 == 0 {
			w, e = 8, -e
		}
		v.Rows = append(v.Rows, ValidationRow{Model: "mlp", Bandwidth: "30Mbit", Pipeline: "dense", Workers: w,
			MeasuredMS: 100, PredictedMS: 100 * (1 + e), ComputeMS: 40})
	}
	if got := v.Quantile(0.5); math.Abs(got-0.05) > 1e-9 {
		t.Errorf("median %g, want 0.05", got)
	}
	if got := v.Quantile(0.9); math.Abs(got-0.09) > 1e-9 {
		t.Errorf("90th percentile %g, want 0.09", got)
	}
	md := v.Markdown()
	for _, want := range []string{
		"| mlp | 30Mbit | dense | 8 | 100.0 | 99.0 | 40.0 | -1.0% |",
		"over 10 runs: median 5.0%, 90th percentile 9.0%, largest 10.0%",
		"by workers: 8 workers 5.0% and 9.0%; 2 workers 6.0% and 10.0%.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
