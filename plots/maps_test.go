package plots

import (
	"image/color"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// testGrid is a 3x3 map over log axes whose values rise from -0.3 to +0.3 across.
func testGrid() Grid {
	name := func(v float64) string { return formatValue(v) }
	return Grid{
		X: []float64{1, 10, 100}, Y: []float64{1e9, 1e10, 1e11}, LogX: true, LogY: true,
		Z:      [][]float64{{-0.3, 0, 0.3}, {-0.3, 0, 0.3}, {-0.3, math.NaN(), 0.3}},
		XLabel: "call", YLabel: "bandwidth", XName: name, YName: name,
	}
}

// TestGainMapColoursBothSides: the cells below zero are drawn bluish and those above
// reddish, each over a cell's area, and a missing value grey.
func TestGainMapColoursBothSides(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gain.png")
	if err := GainMap(path, "gain", testGrid(), 0.1, []Mark{{Label: "A", X: 10, Y: 1e10}}); err != nil {
		t.Fatal(err)
	}
	img := decodeFigure(t, path)
	pal := diverging(21).Colors()
	for _, c := range []color.Color{pal[0], pal[20], color.Gray{0xCC}} {
		if n := countColor(img, c); n < 2000 {
			t.Errorf("colour %v covers %d pixels, want a cell's worth", c, n)
		}
	}
}

// TestRegionMapColoursEachName: each name that holds a cell shows in its own colour.
func TestRegionMapColoursEachName(t *testing.T) {
	g := testGrid()
	g.Z = [][]float64{{0, 0, 1}, {0, 1, 1}, {2, 2, 2}}
	names := []string{"dense", "pertensor", "ssfusion"}
	path := filepath.Join(t.TempDir(), "fastest.png")
	if err := RegionMap(path, "fastest", g, names, nil); err != nil {
		t.Fatal(err)
	}
	img := decodeFigure(t, path)
	for i, c := range nameColors(names) {
		if n := countColor(img, c); n < 2000 {
			t.Errorf("%s's colour covers %d pixels, want its cells' worth", names[i], n)
		}
	}
}

func TestMapsRefuseBadGrids(t *testing.T) {
	short := testGrid()
	short.Z = short.Z[:2]
	ragged := testGrid()
	ragged.Z[1] = ragged.Z[1][:2]
	zero := testGrid()
	zero.X[0] = 0
	for name, g := range map[string]Grid{"rows missing": short, "ragged": ragged, "zero on a log axis": zero} {
		path := filepath.Join(t.TempDir(), "bad.png")
		if err := GainMap(path, "bad", g, 0, nil); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: GainMap error %v, want one naming the file", name, err)
		}
		if err := RegionMap(path, "bad", g, []string{"a"}, nil); err == nil {
			t.Errorf("%s: RegionMap drew it", name)
		}
	}
}
