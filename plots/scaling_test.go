package plots

import (
	"image"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot"
)

// workerCounts are the x values of a scaling chart: 8 to 256 workers.
var workerCounts = []float64{8, 16, 32, 64, 128, 256}

// scalingSeries returns a series per name over workerCounts, each rising at its own rate.
func scalingSeries(names ...string) []Series {
	var series []Series
	for i, name := range names {
		s := Series{Name: name}
		for _, n := range workerCounts {
			s.X = append(s.X, n)
			s.Y = append(s.Y, n*float64(10+i)/(1+n/64))
		}
		series = append(series, s)
	}
	return series
}

func TestLines(t *testing.T) {
	tests := []struct {
		name   string
		series []Series
		logX   bool
		colors []color.Color // that must show on more than minPixels pixels each
		// minPixels is above the 150 or so that a series' legend entry alone gives, so that
		// the test fails if only the legend is drawn; a point adds about 70, a line 1000s.
		minPixels int
	}{
		{"pipelines on log axis", scalingSeries("dense", "pertensor", "multitensor", "ssfusion", "safusion", "exdyna"), true,
			[]color.Color{pipelineColor(0), pipelineColor(3), pipelineColor(5)}, 600},
		{"linear axis", scalingSeries("ssfusion", "dense"), false, []color.Color{pipelineColor(3), pipelineColor(0)}, 600},
		{"single point on log axis", []Series{{Name: "ssfusion", X: []float64{8}, Y: []float64{100}}}, true,
			[]color.Color{pipelineColor(3)}, 190},
		{"single point on linear axis", []Series{{Name: "dense", X: []float64{1}, Y: []float64{0}}}, false,
			[]color.Color{pipelineColor(0)}, 190},
		{"single point at x = 1 on log axis", []Series{{Name: "a", X: []float64{1}, Y: []float64{3}}}, true, nil, 0},
		{"negative y", []Series{{Name: "exdyna", X: []float64{8, 16}, Y: []float64{-5, 5}}}, true,
			[]color.Color{pipelineColor(5)}, 600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out", "lines.png")
			if err := Lines(path, "Throughput against workers", "workers", "samples/s", tt.series, tt.logX); err != nil {
				t.Fatal(err)
			}
			img := decodeFigure(t, path)
			for _, c := range tt.colors {
				if n := countColor(img, c); n < tt.minPixels {
					t.Errorf("colour %v covers %d pixels, want at least %d", c, n, tt.minPixels)
				}
			}
		})
	}
}

func TestLinesErrors(t *testing.T) {
	ok := Series{Name: "dense", X: []float64{8, 16}, Y: []float64{1, 2}}
	tests := []struct {
		name   string
		series []Series
		logX   bool
		want   string // in the error
	}{
		{"no series", nil, false, "no series"},
		{"series without points", []Series{ok, {Name: "ssfusion"}}, false, `series "ssfusion": no points`},
		{"lengths differ", []Series{{Name: "ssfusion", X: []float64{8, 16}, Y: []float64{1}}}, false,
			`series "ssfusion": X has 2 values but Y has 1`},
		{"NaN y", []Series{ok, {Name: "exdyna", X: []float64{8, 16}, Y: []float64{1, math.NaN()}}}, false,
			`series "exdyna": point 1 is (16, NaN)`},
		{"infinite x", []Series{{Name: "safusion", X: []float64{math.Inf(1)}, Y: []float64{1}}}, false,
			`series "safusion": point 0 is (+Inf, 1)`},
		{"unnamed series", []Series{ok, {X: []float64{1}, Y: []float64{math.Inf(-1)}}}, false, "series 1: point 0"},
		{"zero x on log axis", []Series{{Name: "dense", X: []float64{0, 8}, Y: []float64{1, 2}}}, true,
			`series "dense": point 0 has X = 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "lines.png")
			err := Lines(path, "t", "x", "y", tt.series, tt.logX)
			checkNoFigure(t, path, err, tt.want)
		})
	}
}

func TestLinesAxes(t *testing.T) {
	tests := []struct {
		name             string
		series           []Series
		logX             bool
		xMin, xMax, yMin float64
		yMaxAtLeast      float64
		wantLog          bool
	}{
		{"log axis over 8..256", scalingSeries("dense", "ssfusion"), true, 8, 256, 0, 500, true},
		{"lone x on log axis", []Series{{Name: "dense", X: []float64{1}, Y: []float64{5}}}, true, 0.5, 2, 0, 5, true},
		{"linear axis", []Series{{Name: "dense", X: []float64{2, 4}, Y: []float64{30, 40}}}, false, 2, 4, 0, 40, false},
		{"negative y", []Series{{Name: "dense", X: []float64{2, 4}, Y: []float64{-3, 4}}}, false, 2, 4, -3, 4, false},
		{"all y zero", []Series{{Name: "dense", X: []float64{2, 4}, Y: []float64{0, 0}}}, false, 2, 4, 0, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _, err := linesPlot("t", "x", "y", tt.series, tt.logX)
			if err != nil {
				t.Fatal(err)
			}
			if p.X.Min != tt.xMin || p.X.Max != tt.xMax {
				t.Errorf("x axis spans %g to %g, want %g to %g", p.X.Min, p.X.Max, tt.xMin, tt.xMax)
			}
			if p.Y.Min != tt.yMin || p.Y.Max < tt.yMaxAtLeast {
				t.Errorf("y axis spans %g to %g, want from %g to at least %g", p.Y.Min, p.Y.Max, tt.yMin, tt.yMaxAtLeast)
			}
			if _, isLog := p.X.Scale.(plot.LogScale); isLog != tt.wantLog {
				t.Errorf("x axis scale is %T, want log: %v", p.X.Scale, tt.wantLog)
			}
		})
	}
}

func TestValueTicks(t *testing.T) {
	labels := func(ticks valueTicks, min, max float64) []string {
		var out []string
		for _, tick := range ticks.Ticks(min, max) {
			out = append(out, tick.Label)
		}
		return out
	}
	if got, want := labels(workerCounts, 8, 256), []string{"8", "16", "32", "64", "128", "256"}; !slices.Equal(got, want) {
		t.Errorf("ticks over 8..256 are labelled %q, want %q", got, want)
	}
	// One tick per x from 8 to 256 in steps of 8: too many to label, so only powers of two are.
	var dense valueTicks
	for x := 8.0; x <= 256; x += 8 {
		dense = append(dense, x)
	}
	got := labels(dense, 8, 256)
	if len(got) != len(dense) {
		t.Fatalf("got %d ticks, want one per value, %d", len(got), len(dense))
	}
	var labelled []string
	for _, l := range got {
		if l != "" {
			labelled = append(labelled, l)
		}
	}
	if want := []string{"8", "16", "32", "64", "128", "256"}; !slices.Equal(labelled, want) {
		t.Errorf("crowded ticks are labelled %q, want only %q", labelled, want)
	}
}

func TestNameColors(t *testing.T) {
	// The experiment plots colour the pipelines in the order the specs list them; Lines must
	// agree with them whatever the order of its series.
	runs := make([]run, len(pipelineOrder))
	for i, name := range pipelineOrder {
		runs[i].Pipeline = name
	}
	assignLooks(runs)
	shuffled := []string{"exdyna", "ssfusion", "dense", "safusion", "multitensor", "pertensor"}
	colors := nameColors(shuffled)
	for i, name := range shuffled {
		if want := runs[indexOf(pipelineOrder, name)].look.color; colors[i] != want {
			t.Errorf("%s is %v in Lines but %v in the experiment plots", name, colors[i], want)
		}
	}

	// Other names take colours that no name in the chart holds, and keep them when repeated.
	colors = nameColors([]string{"model-a", "dense", "model-b", "model-a"})
	if colors[0] == colors[1] || colors[2] == colors[1] || colors[0] == colors[2] {
		t.Errorf("colours %v are not distinct", colors[:3])
	}
	if colors[3] != colors[0] {
		t.Errorf("a repeated name got %v, then %v", colors[0], colors[3])
	}

	// The convergence experiment charts nine pipelines at once: each needs its own colour.
	nine := []string{"dense", "pertensor", "multitensor", "ssfusion", "omgs", "oktopk", "spardl", "cupcake", "powersgd"}
	seen := map[color.Color]string{}
	for i, c := range nameColors(nine) {
		if other, ok := seen[c]; ok {
			t.Errorf("%s and %s share the colour %v", other, nine[i], c)
		}
		seen[c] = nine[i]
	}
}

func TestStackedBars(t *testing.T) {
	parts := []string{"compute", "selection", "exposed communication"}
	var many []Stack
	for i, name := range []string{"dense", "pertensor", "multitensor", "ssfusion", "ssfusion-naive", "ssfusion-o",
		"ssfusion-i", "safusion", "exdyna", "dense 256 workers", "ssfusion 256 workers", "exdyna 256 workers"} {
		many = append(many, Stack{Label: name, Parts: []float64{100, float64(10 * i), float64(200 - 15*i)}})
	}
	tests := []struct {
		name   string
		parts  []string
		stacks []Stack
	}{
		{"twelve stacks", parts, many},
		{"one stack", parts, []Stack{{Label: "ssfusion", Parts: []float64{1, 2, 3}}}},
		{"one part", []string{"total"}, []Stack{{Label: "a", Parts: []float64{1}}, {Label: "b", Parts: []float64{2}}}},
		{"all zero", parts, []Stack{{Label: "idle", Parts: []float64{0, 0, 0}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out", "stacks.png")
			if err := StackedBars(path, "Time per step", "ms per step", tt.parts, tt.stacks); err != nil {
				t.Fatal(err)
			}
			img := decodeFigure(t, path)
			if sum(tt.stacks[0].Parts) == 0 {
				return // no bar to look for
			}
			// More pixels than the legend's swatch alone would give: the bars show.
			swatch := int(swatchThumbnail.Dots(figureDPI) * swatchThumbnail.Dots(figureDPI))
			for i, c := range partColors(len(tt.parts)) {
				if n := countColor(img, c); n < 3*swatch {
					t.Errorf("the colour %v of part %q covers only %d pixels", c, tt.parts[i], n)
				}
			}
		})
	}
}

func TestStackedBarsErrors(t *testing.T) {
	parts := []string{"compute", "selection", "comm"}
	ok := Stack{Label: "dense", Parts: []float64{1, 2, 3}}
	tests := []struct {
		name   string
		parts  []string
		stacks []Stack
		want   string // in the error
	}{
		{"no stacks", parts, nil, "no stacks"},
		{"no part names", nil, []Stack{{Label: "dense"}}, "no part names"},
		{"too few parts", parts, []Stack{ok, {Label: "ssfusion", Parts: []float64{1, 2}}}, `stack "ssfusion" has 2 parts, want 3`},
		{"too many parts", parts, []Stack{{Label: "exdyna", Parts: []float64{1, 2, 3, 4}}}, `stack "exdyna" has 4 parts, want 3`},
		{"negative part", parts, []Stack{ok, {Label: "ssfusion", Parts: []float64{1, -2, 3}}}, `stack "ssfusion": part "selection" is -2`},
		{"NaN part", parts, []Stack{{Label: "safusion", Parts: []float64{1, 2, math.NaN()}}}, `stack "safusion": part "comm" is NaN`},
		{"infinite part", parts, []Stack{ok, {Parts: []float64{math.Inf(1), 2, 3}}}, `stack 1: part "compute" is +Inf`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "stacks.png")
			err := StackedBars(path, "t", "ms", tt.parts, tt.stacks)
			checkNoFigure(t, path, err, tt.want)
		})
	}
}

func TestPartColors(t *testing.T) {
	for n := 1; n <= 6; n++ {
		colors := partColors(n)
		for i := 1; i < n; i++ {
			if colors[i-1].(color.Gray).Y >= colors[i].(color.Gray).Y {
				t.Errorf("partColors(%d) = %v: not dark to light", n, colors)
			}
		}
	}
}

// decodeFigure checks that path is a PNG of the figure's size with something drawn on it,
// and that it is the folder's only file (no temporary file left behind).
func decodeFigure(t *testing.T, path string) image.Image {
	t.Helper()
	img := openFigure(t, path)
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	if inked, _ := ink(img); inked < w*h/200 {
		t.Errorf("%s: only %d of %d pixels are not white", path, inked, w*h)
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("%s holds %d files, want only the figure", filepath.Dir(path), len(entries))
	}
	return img
}

func countColor(img image.Image, want color.Color) int {
	w := color.RGBAModel.Convert(want).(color.RGBA)
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)).(color.RGBA) == w {
				n++
			}
		}
	}
	return n
}

// checkNoFigure checks that err is an error that names path and says want, and that
// nothing was written to the folder of path.
func checkNoFigure(t *testing.T, path string, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatal("got no error")
	}
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name %s and say %q", err, path, want)
	}
	entries, readErr := os.ReadDir(filepath.Dir(path))
	if readErr != nil {
		t.Fatal(readErr)
	}
	if len(entries) != 0 {
		t.Errorf("%s holds %d files after an error, want none", filepath.Dir(path), len(entries))
	}
}
