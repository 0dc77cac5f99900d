package plots

import (
	"image"
	"image/color"
	"math"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot/plotter"
)

// seededCells writes three seeds of dense and of ssfusion, each group's seeds apart in speed,
// traffic and learning, and a cell of its own.
func seededCells(t *testing.T) []Cell {
	t.Helper()
	root := t.TempDir()
	missing := 2.0
	var cells []Cell
	for _, pipeline := range []string{"dense", "ssfusion"} {
		for seed := range 3 {
			c := Cell{Name: pipeline + "-seed" + string(rune('1'+seed)), Pipeline: pipeline, Setting: "workers-2", Group: pipeline}
			c.Dir = filepath.Join(root, c.Name)
			f := fixture{cell: c, samplesPS: 800 + 100*float64(seed), bytes: 4e6, lag: 0.05 * float64(seed)}
			if pipeline == "ssfusion" {
				f.samplesPS, f.bytes, f.missing = 2400+300*float64(seed), 8e4, &missing
			}
			writeCell(t, f)
			cells = append(cells, c)
		}
	}
	alone := Cell{Name: "alone", Pipeline: "pertensor", Setting: "workers-2", Dir: filepath.Join(root, "alone")}
	writeCell(t, fixture{cell: alone, samplesPS: 1000, bytes: 1e5})
	return append(cells, alone)
}

func TestPoolSeeds(t *testing.T) {
	runs, err := loadRuns(seededCells(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 {
		t.Fatalf("%d runs, want the two groups and the lone cell", len(runs))
	}
	for i, want := range []struct {
		label          string
		seeds          int
		samplesPS, std float64
		missing        *float64
	}{
		{"dense workers-2 (n=3)", 3, 900, 100, nil},
		{"ssfusion workers-2 (n=3)", 3, 2700, 300, ptr(2)},
		{"pertensor workers-2", 0, 1000, 0, nil},
	} {
		r := runs[i]
		samplesPS := func(r run) float64 { return r.summary.Throughput.SamplesPerS }
		if r.label != want.label || len(r.seeds) != want.seeds {
			t.Errorf("run %d: %q with %d seeds, want %q with %d", i, r.label, len(r.seeds), want.label, want.seeds)
		}
		if got, spread := samplesPS(r), spread(r, samplesPS); math.Abs(got-want.samplesPS) > 1e-9 || math.Abs(spread-want.std) > 1e-9 {
			t.Errorf("%s: %g ± %g samples/s, want %g ± %g", r.label, got, spread, want.samplesPS, want.std)
		}
		if got := r.summary.Sparsity.TensorsMissingPerStep; (got == nil) != (want.missing == nil) || got != nil && *got != *want.missing {
			t.Errorf("%s: tensors missing %v, want %v", r.label, got, want.missing)
		}
	}
	// The step time is the seeds' mean, part by part.
	var total float64
	for _, s := range runs[0].seeds {
		total += s.summary.Throughput.StepMS.Comm / 3
	}
	if got := runs[0].summary.Throughput.StepMS.Comm; math.Abs(got-total) > 1e-9 {
		t.Errorf("mean comm ms %g, want %g", got, total)
	}
}

func ptr(v float64) *float64 { return &v }

func TestPoolCurves(t *testing.T) {
	curve := func(points ...[3]float64) []stepPoint {
		var c []stepPoint
		for _, p := range points {
			c = append(c, stepPoint{step: int(p[0]), xy: plotter.XY{X: p[1], Y: p[2]}})
		}
		return c
	}
	// The second seed stopped after step 20 and misses step 10's evaluation: only the steps
	// both have count.
	mean, lo, hi := poolCurves([][]stepPoint{
		curve([3]float64{10, 1, 50}, [3]float64{20, 2, 60}, [3]float64{30, 3, 70}),
		curve([3]float64{20, 4, 40}, [3]float64{5, 0.5, 10}),
	})
	want := struct{ mean, lo, hi plotter.XYs }{
		plotter.XYs{{X: 3, Y: 50}}, plotter.XYs{{X: 3, Y: 40}}, plotter.XYs{{X: 3, Y: 60}},
	}
	for _, c := range []struct {
		name      string
		got, want plotter.XYs
	}{{"mean", mean, want.mean}, {"low", lo, want.lo}, {"high", hi, want.hi}} {
		if len(c.got) != len(c.want) || len(c.got) > 0 && c.got[0] != c.want[0] {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}

// TestDrawSeeds: a group's curve lies in a band of its colour, tinted on white.
func TestDrawSeeds(t *testing.T) {
	out := filepath.Join(t.TempDir(), "plots")
	paths, err := Draw(out, seededCells(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		checkPNG(t, p)
	}
	img := openFigure(t, filepath.Join(out, accuracyTimeFile))
	for i := range 2 {
		tint := bandTint(pipelineColor(i))
		// Lines' anti-aliased edges hold a few pixels of every tint; a band holds an area.
		if n := countNear(img, tint, 2); n < 2000 {
			t.Errorf("%s has %d pixels of pipeline colour %d's band (%v on white is %v), want an area", accuracyTimeFile, n, i, pipelineColor(i), tint)
		}
	}
}

// bandTint is c drawn with the band's opacity on white.
func bandTint(c color.Color) color.RGBA {
	r, g, b, _ := c.RGBA()
	mix := func(v uint32) uint8 { return uint8(math.Round(float64(v>>8)*0x40/255 + 255*(1-float64(0x40)/255))) }
	return color.RGBA{mix(r), mix(g), mix(b), 0xFF}
}

// countNear counts the pixels of img within tolerance of want in every channel.
func countNear(img image.Image, want color.RGBA, tolerance int) int {
	near := func(a, b uint8) bool { return abs(int(a)-int(b)) <= tolerance }
	n := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			if near(c.R, want.R) && near(c.G, want.G) && near(c.B, want.B) {
				n++
			}
		}
	}
	return n
}

// TestDensityTargetOfGroups: cells that are all in seed groups still show their target.
func TestDensityTargetOfGroups(t *testing.T) {
	cells := seededCells(t)
	cells = cells[:len(cells)-1] // leave out the lone cell: every run is a group
	out := filepath.Join(t.TempDir(), "plots")
	if _, err := Draw(out, cells); err != nil {
		t.Fatal(err)
	}
	if !hasColor(openFigure(t, filepath.Join(out, densityFile)), targetColor) {
		t.Errorf("%s of seed groups lacks the target's line", densityFile)
	}
}
