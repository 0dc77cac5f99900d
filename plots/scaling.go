package plots

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/ssfusion/ssfusion/internal/atomicfile"
)

// Series is one line of a Lines chart: the points (X[i], Y[i]) joined in order.
type Series struct {
	Name string // in the legend; a pipeline's name gives the line that pipeline's colour
	X, Y []float64
}

// Lines draws a PNG chart at path with one line per series, each point marked, and a legend.
// The y axis starts at 0 (lower only if a value is negative). With logX the x axis is
// logarithmic with ticks at the x values present, which suits counts that double, such as
// worker counts 8, 16, ..., 256; all x values must then be positive.
//
// Invalid input (no series, a series without points, X and Y of different lengths, a value
// that is NaN or infinite) is an error naming the series, and nothing is written. The
// folder of path is created if missing; the file is replaced atomically.
func Lines(path, title, xLabel, yLabel string, series []Series, logX bool) error {
	if err := checkSeries(series, logX); err != nil {
		return fmt.Errorf("plotting %s: %w", path, err)
	}
	return writeFigure(path, linesPainter(title, xLabel, yLabel, series, logX))
}

// checkSeries rejects what cannot be drawn, or would be drawn misleadingly: gonum itself
// would drop NaN silently and panic on Inf or on a log axis over 0.
func checkSeries(series []Series, logX bool) error {
	if len(series) == 0 {
		return fmt.Errorf("no series to plot")
	}
	for i, s := range series {
		name := seriesName(i, s)
		switch {
		case len(s.X) != len(s.Y):
			return fmt.Errorf("%s: X has %d values but Y has %d", name, len(s.X), len(s.Y))
		case len(s.X) == 0:
			return fmt.Errorf("%s: no points", name)
		}
		for j := range s.X {
			if !finite(s.X[j]) || !finite(s.Y[j]) {
				return fmt.Errorf("%s: point %d is (%g, %g); values must be finite", name, j, s.X[j], s.Y[j])
			}
			if logX && s.X[j] <= 0 {
				return fmt.Errorf("%s: point %d has X = %g; a log x axis needs X > 0", name, j, s.X[j])
			}
		}
	}
	return nil
}

// seriesName names a series in errors; an unnamed one goes by its position.
func seriesName(i int, s Series) string {
	if s.Name == "" {
		return fmt.Sprintf("series %d", i)
	}
	return fmt.Sprintf("series %q", s.Name)
}

func linesPainter(title, xLabel, yLabel string, series []Series, logX bool) painter {
	return func(dc draw.Canvas) error {
		p, legend, err := linesPlot(title, xLabel, yLabel, series, logX)
		if err != nil {
			return err
		}
		drawWithLegend(dc, p, &legend)
		return nil
	}
}

// linesPlot builds the plot and legend that Lines draws.
func linesPlot(title, xLabel, yLabel string, series []Series, logX bool) (*plot.Plot, plot.Legend, error) {
	p := newPlot(title, xLabel, yLabel)
	p.Add(gridLines(true, true))
	legend := newLegend(lineThumbnail)
	colors := nameColors(seriesNames(series))
	for i, s := range series {
		xys := make(plotter.XYs, len(s.X))
		for j := range s.X {
			xys[j] = plotter.XY{X: s.X[j], Y: s.Y[j]}
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, legend, err
		}
		line.Color, line.Width = colors[i], vg.Points(1.5)
		points.GlyphStyle = draw.GlyphStyle{Color: colors[i], Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
		p.Add(line, points)
		legend.Add(s.Name, line, points)
	}
	fromZero(&p.Y)
	if logX {
		log2Axis(&p.X, series)
	}
	return p, legend, nil
}

func seriesNames(series []Series) []string {
	names := make([]string, len(series))
	for i, s := range series {
		names[i] = s.Name
	}
	return names
}

// fromZero makes a value axis start at 0, so that the lengths of lines above it compare
// as ratios; an axis that would be empty (all values 0) gets the range 0 to 1.
func fromZero(a *plot.Axis) {
	a.Min = math.Min(0, a.Min)
	if a.Max <= a.Min {
		a.Max = a.Min + 1
	}
}

// log2Axis makes a logarithmic axis with a tick at every x value of the series. A lone
// value gets a factor of 2 of room each side: gonum would widen it by ±1, which reaches 0
// for x = 1 and breaks the log scale.
func log2Axis(a *plot.Axis, series []Series) {
	var xs []float64
	for _, s := range series {
		xs = append(xs, s.X...)
	}
	slices.Sort(xs)
	xs = slices.Compact(xs)
	a.Scale = plot.LogScale{}
	a.Tick.Marker = valueTicks(xs)
	a.Min, a.Max = xs[0], xs[len(xs)-1]
	if a.Min == a.Max {
		a.Min, a.Max = a.Min/2, a.Max*2
	}
}

// maxTickLabels is the most tick labels valueTicks writes before thinning them: more would
// run into each other across the figure's width.
const maxTickLabels = 12

// valueTicks puts a tick at each of its sorted values. When there are too many to label,
// only the powers of two keep their labels, which on a log2 axis stay evenly spaced.
type valueTicks []float64

func (vs valueTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for _, v := range vs {
		if v < min || v > max {
			continue
		}
		t := plot.Tick{Value: v}
		if len(vs) <= maxTickLabels || isPowerOfTwo(v) {
			t.Label = plainNumber(v)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

func isPowerOfTwo(v float64) bool {
	frac, _ := math.Frexp(v)
	return frac == 0.5
}

// pipelineOrder is the order in which the experiment specs list the pipelines. The
// experiment plots colour pipelines in order of first appearance, so for a spec that lists
// them this way (all in experiments/ but density.yaml, which has no dense) a pipeline's
// colour in Lines is the one it has there.
var pipelineOrder = []string{"dense", "pertensor", "multitensor", "ssfusion", "safusion", "exdyna"}

// nameColors gives each name its colour: a known pipeline always gets the same one, and
// other names take, in order of first appearance, the palette colours no name in the list
// already holds, so that they stay distinct from each other and from the pipelines drawn.
func nameColors(names []string) []color.Color {
	index := make(map[string]int)
	used := make(map[int]bool)
	for _, name := range names {
		if i := indexOf(pipelineOrder, name); i >= 0 {
			index[name], used[i] = i, true
		}
	}
	next := 0
	for _, name := range names {
		if _, ok := index[name]; ok {
			continue
		}
		for used[next%paletteSize] && next < 2*paletteSize {
			next++ // past the second lap every colour is taken; repeat them in turn
		}
		index[name], used[next%paletteSize] = next, true
		next++
	}
	colors := make([]color.Color, len(names))
	for i, name := range names {
		colors[i] = pipelineColor(index[name])
	}
	return colors
}

// paletteSize is how many distinct colours pipelineColor has.
var paletteSize = func() int {
	for n := 1; ; n++ {
		if pipelineColor(n) == pipelineColor(0) {
			return n
		}
	}
}()

// Stack is one bar of a StackedBars chart: Parts[i] is the length of the segment of the
// chart's i-th part name.
type Stack struct {
	Label string
	Parts []float64
}

// StackedBars draws a PNG chart at path with a bar per stack, its parts stacked in the
// order of partNames, the total written at its end, and a legend of the parts. The bars are
// horizontal, the first stack on top, so that labels such as "multitensor" stay readable
// for a dozen bars; valueLabel names the value axis, which therefore runs across and starts
// at 0.
//
// A stack whose Parts differ in number from partNames, or with a part that is negative or
// not finite, is an error naming the stack and part, as are no stacks or no parts; nothing
// is written then. The folder of path is created if missing; the file is replaced atomically.
func StackedBars(path, title, valueLabel string, partNames []string, stacks []Stack) error {
	if err := checkStacks(partNames, stacks); err != nil {
		return fmt.Errorf("plotting %s: %w", path, err)
	}
	return writeFigure(path, stacksPainter(title, valueLabel, partNames, stacks))
}

func checkStacks(partNames []string, stacks []Stack) error {
	switch {
	case len(stacks) == 0:
		return fmt.Errorf("no stacks to plot")
	case len(partNames) == 0:
		return fmt.Errorf("no part names")
	}
	for i, s := range stacks {
		name := stackName(i, s)
		if len(s.Parts) != len(partNames) {
			return fmt.Errorf("%s has %d parts, want %d, one per part name %q", name, len(s.Parts), len(partNames), partNames)
		}
		for j, v := range s.Parts {
			if !finite(v) || v < 0 {
				return fmt.Errorf("%s: part %q is %g; parts must be finite and at least 0", name, partNames[j], v)
			}
		}
	}
	return nil
}

// stackName names a stack in errors; an unlabelled one goes by its position.
func stackName(i int, s Stack) string {
	if s.Label == "" {
		return fmt.Sprintf("stack %d", i)
	}
	return fmt.Sprintf("stack %q", s.Label)
}

func stacksPainter(title, valueLabel string, partNames []string, stacks []Stack) painter {
	return func(dc draw.Canvas) error {
		p := newPlot(title, valueLabel, "")
		p.Y.Min, p.Y.Max = -0.5, float64(len(stacks))-0.5
		nominalRows(p, stacks)
		p.X.Min, p.X.Max = 0, stacksMax(stacks)
		p.Add(gridLines(true, false))

		colors := partColors(len(partNames))
		legend := newLegend(swatchThumbnail)
		for i, name := range partNames {
			legend.Add(name, swatch{colors[i]})
		}
		plotArea, legendArea := besideLegend(dc, p, &legend)
		width := barWidth(p.DataCanvas(plotArea), len(stacks))
		if err := addStacks(p, stacks, colors, width); err != nil {
			return err
		}
		p.Draw(plotArea)
		legend.Draw(legendArea)
		return nil
	}
}

// addStacks adds a bar chart per part, each stacked on the one before, and the totals.
func addStacks(p *plot.Plot, stacks []Stack, colors []color.Color, width vg.Length) error {
	var below *plotter.BarChart
	for j := range colors {
		values := make(plotter.Values, len(stacks))
		for i, s := range stacks {
			values[cellPosition(i, len(stacks))] = s.Parts[j]
		}
		bars, err := plotter.NewBarChart(values, width)
		if err != nil {
			return err
		}
		bars.Horizontal = true
		bars.Color = colors[j]
		// A white outline parts the segments, so that neighbouring greys stay apart.
		bars.LineStyle = draw.LineStyle{Color: color.White, Width: vg.Points(0.5)}
		if below != nil {
			bars.StackOn(below)
		}
		p.Add(bars)
		below = bars
	}
	for i, s := range stacks {
		total := sum(s.Parts)
		err := addLabel(p, plotter.XY{X: total, Y: float64(cellPosition(i, len(stacks)))},
			formatValue(total), valueStyle(draw.XLeft, draw.YCenter), vg.Point{X: vg.Points(4)})
		if err != nil {
			return err
		}
	}
	return nil
}

// nominalRows names the rows after the stacks, the first on top, shrinking the names when
// the rows get too close for the default size to stay apart.
func nominalRows(p *plot.Plot, stacks []Stack) {
	names := make([]string, len(stacks))
	for i, s := range stacks {
		names[cellPosition(i, len(stacks))] = s.Label
	}
	p.NominalY(names...)
	row := (figureHeight - 3*vg.Centimeter) / vg.Length(len(stacks))
	p.Y.Tick.Label.Font.Size = min(p.Y.Tick.Label.Font.Size, 0.8*row)
}

// stacksMax returns the end of the value axis: the longest bar with room for its total.
func stacksMax(stacks []Stack) float64 {
	hi := 0.0
	for _, s := range stacks {
		hi = math.Max(hi, sum(s.Parts))
	}
	if hi == 0 {
		return 1 // an axis from 0 to 0 would be meaningless; all bars are empty anyway
	}
	return hi * headroom
}

func sum(vs []float64) float64 {
	total := 0.0
	for _, v := range vs {
		total += v
	}
	return total
}

// partColors returns n greys from dark to light, as the step-time breakdown uses: greys do
// not read as pipelines, whose colours the line charts use. The lightest stays darker than
// the grid lines so that it shows against the background.
func partColors(n int) []color.Color {
	const darkest, lightest = 0x40, 0xD0
	colors := make([]color.Color, n)
	for i := range colors {
		shade := darkest
		if n > 1 {
			shade += i * (lightest - darkest) / (n - 1)
		}
		colors[i] = color.Gray{uint8(shade)}
	}
	return colors
}

// writeFigure renders paint and writes it to path, creating the folder first. It renders
// before touching the disk, so that a failed drawing leaves nothing behind.
func writeFigure(path string, paint painter) error {
	png, err := renderPNG(paint)
	if err != nil {
		return fmt.Errorf("drawing %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating the folder of %s: %w", path, err)
	}
	return atomicfile.Write(path, png)
}
