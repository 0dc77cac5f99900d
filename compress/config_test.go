package compress

import (
	"math"
	"testing"
)

func TestKFor(t *testing.T) {
	for _, tc := range []struct {
		n       int
		density float64
		want    int
	}{
		{0, 0.01, 0}, {1, 0.01, 1}, {99, 0.01, 1}, {250, 0.01, 2}, {1000, 1, 1000}, {7, 0.5, 3},
	} {
		if got := KFor(tc.n, tc.density); got != tc.want {
			t.Errorf("KFor(%d, %g) = %d, want %d", tc.n, tc.density, got, tc.want)
		}
	}
}

func TestDensityWarmup(t *testing.T) {
	c := Config{Density: 0.01, WarmupSteps: 4}
	want := []float64{0.25, 0.25 * math.Pow(0.04, 0.25), 0.05, 0.25 * math.Pow(0.04, 0.75), 0.01, 0.01}
	for step, w := range want {
		if got := c.DensityAt(step); math.Abs(got-w) > 1e-12 {
			t.Errorf("step %d: density %g, want %g", step, got, w)
		}
	}
	if got := (Config{Density: 0.5, WarmupSteps: 10}).DensityAt(0); got != 0.5 {
		t.Errorf("a target above the start density must not warm up downwards: %g", got)
	}
	if got := (Config{Density: 0.01}).DensityAt(0); got != 0.01 {
		t.Errorf("no warm-up: %g", got)
	}
	if err := (Config{Density: 0.01, Selector: "topk", WarmupSteps: -1}).Check(); err == nil {
		t.Error("negative warm-up accepted")
	}
}

func TestConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"plain", Config{Density: 0.01, Selector: "topk"}, true},
		{"no error feedback", Config{Density: 0.01, Selector: "topk", NoErrorFeedback: true}, true},
		{"momentum correction", Config{Density: 0.01, Selector: "topk", Momentum: 0.9}, true},
		{"momentum correction without error feedback", Config{Density: 0.01, Selector: "topk", Momentum: 0.9, NoErrorFeedback: true}, false},
		{"density 0", Config{Selector: "topk"}, false},
		{"momentum 1", Config{Density: 0.01, Selector: "topk", Momentum: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Check(); (err == nil) != tc.ok {
				t.Fatalf("Check() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}
