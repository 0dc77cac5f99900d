package plots

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTradeoff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tradeoff.png")
	points := []Estimate{
		{Name: "dense", Pipeline: "dense", X: 1.6e6, Y: 98.3, Lo: 98.2, Hi: 98.4},
		{Name: "pertensor 0.01", Pipeline: "pertensor", X: 6e3, Y: 96.4, Lo: 96.3, Hi: 96.5},
		{Name: "pertensor matched", Pipeline: "pertensor", X: 1.1e5, Y: 97.9, Lo: 97.5, Hi: 98.3},
		{Name: "ssfusion", Pipeline: "ssfusion", X: 5.8e4, Y: 98.0, Lo: 97.8, Hi: 98.2},
	}
	if err := Tradeoff(path, "accuracy against traffic", "bytes sent per step", "test accuracy (%)", points); err != nil {
		t.Fatal(err)
	}
	img := decodeFigure(t, path)
	// Each pipeline's colour shows: the dots and bars of its points.
	for _, name := range []string{"dense", "pertensor", "ssfusion"} {
		if n := countColor(img, nameColors([]string{name})[0]); n < 20 {
			t.Errorf("%s's colour covers %d pixels", name, n)
		}
	}
	if err := Tradeoff(path, "t", "x", "y", []Estimate{{Name: "lone", X: 10, Y: 1, Lo: 1, Hi: 1}}); err != nil {
		t.Errorf("a lone point: %v", err)
	}
}

func TestTradeoffRefusesBadPoints(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		points []Estimate
		want   string
	}{
		{"none", nil, "no points"},
		{"zero x", []Estimate{{Name: "a", X: 0, Y: 1, Lo: 0, Hi: 2}}, "a: x = 0"},
		{"NaN", []Estimate{{Name: "b", X: 1, Y: math.NaN(), Lo: 0, Hi: 2}}, "b: "},
		{"interval outside", []Estimate{{Name: "c", X: 1, Y: 5, Lo: 0, Hi: 2}}, "does not hold the mean"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".png")
			err := Tradeoff(path, "t", "x", "y", tc.points)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
			if _, statErr := os.Stat(path); statErr == nil {
				t.Error("a file was written")
			}
		})
	}
}
