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
