package plots

import (
	"image/color"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/ssfusion/ssfusion/trainer"
)

// Bar geometry. gonum sizes bars in page lengths, not data units, so the painters measure
// the data area first and size the bars to fill barFill of each slot, up to maxBarWidth
// (a lone bar as wide as the plot reads as a background, not a bar).
const (
	barFill     = 0.8
	maxBarWidth = 15 * vg.Millimeter
	// headroom leaves space beyond the longest bar for its value label.
	headroom = 1.18
)

func throughputPainter(runs []run) painter {
	return func(dc draw.Canvas) error {
		pipelines, settings := distinct(runs)
		title := "Throughput"
		if pooled(runs) {
			title += " (mean of the seeds; error bars: standard deviation)"
		}
		p := newPlot(title, "", "samples/s")
		samplesPerS := func(r run) float64 { return r.summary.Throughput.SamplesPerS }
		p.Y.Min, p.Y.Max = 0, axisMax(runs, withSpread(samplesPerS))
		p.Add(gridLines(false, true))

		legend := newLegend(swatchThumbnail)
		for i, name := range pipelines {
			if name != "" { // cells without a pipeline name are told apart by their setting alone
				legend.Add(name, swatch{pipelineColor(i)})
			}
		}
		plotArea, legendArea := besideLegend(dc, p, &legend)
		// The groups are named below the axis; the slot estimate ignores the y axis, which
		// is narrow next to the groups.
		slot := (plotArea.Max.X - plotArea.Min.X) / vg.Length(len(settings))
		names := fitLabels(p.X.Tick.Label, settings, slot)
		p.X.Min, p.X.Max = -0.5, float64(len(settings))-0.5
		p.NominalX(names...)
		// NominalX pads the y axis by half the first name, room the half-slot margin of
		// X.Min already gives.
		p.Y.Padding = 0

		data := p.DataCanvas(plotArea)
		width := min(barFill*(data.Max.X-data.Min.X)/vg.Length(len(settings)*len(pipelines)), maxBarWidth)
		for _, r := range runs {
			// Bars keep their pipeline's place in every group, so that a pipeline missing
			// from one setting leaves a gap rather than shifting the others.
			place := float64(indexOf(pipelines, r.Pipeline)) - float64(len(pipelines)-1)/2
			v := samplesPerS(r)
			err := addBar(p, barSpec{at: float64(indexOf(settings, r.Setting)), value: v, spread: spread(r, samplesPerS),
				offset: vg.Length(place) * width, width: width, color: r.look.color, label: formatValue(v)})
			if err != nil {
				return err
			}
		}
		p.Draw(plotArea)
		legend.Draw(legendArea)
		return nil
	}
}

// fitLabels breaks the settings' names at their separators ("_" between matrix keys,
// spaces) onto several lines when any is wider than width in style, so that the names of
// neighbouring groups do not run into each other. All or none break, so that they look alike.
func fitLabels(style text.Style, names []string, width vg.Length) []string {
	fits := true
	for _, name := range names {
		fits = fits && style.Width(name) <= width
	}
	if fits {
		return names
	}
	broken := make([]string, len(names))
	for i, name := range names {
		broken[i] = strings.NewReplacer("_", "\n", " ", "\n").Replace(name)
	}
	return broken
}

// barSpec is one bar and its value label.
type barSpec struct {
	at         float64   // position on the nominal axis
	value      float64   // length of the bar
	spread     float64   // standard deviation of the value over seeds, drawn as an error bar; 0 for none
	offset     vg.Length // shift from at, for grouped bars
	width      vg.Length
	color      color.Color
	label      string
	horizontal bool
}

// addBar adds a bar, its error bar if it has a spread, and, when the label fits the bar's
// width, its value label beyond both.
func addBar(p *plot.Plot, b barSpec) error {
	bar, err := plotter.NewBarChart(plotter.Values{b.value}, b.width)
	if err != nil {
		return err
	}
	bar.XMin, bar.Offset, bar.Horizontal = b.at, b.offset, b.horizontal
	bar.Color = b.color
	bar.LineStyle.Width = 0
	p.Add(bar)
	end := b.value
	if b.spread > 0 {
		p.Add(errorBar{at: b.at, value: b.value, spread: b.spread, offset: b.offset, horizontal: b.horizontal})
		end += b.spread
	}

	gap := vg.Points(2)
	if b.horizontal {
		style := valueStyle(draw.XLeft, draw.YCenter)
		if style.Height(b.label) > b.width*1.2 {
			return nil
		}
		return addLabel(p, plotter.XY{X: end, Y: b.at}, b.label, style, vg.Point{X: gap, Y: b.offset})
	}
	style := valueStyle(draw.XCenter, draw.YBottom)
	if style.Width(b.label) > b.width*1.2 {
		return nil
	}
	return addLabel(p, plotter.XY{X: b.at, Y: end}, b.label, style, vg.Point{X: b.offset, Y: gap})
}

// axisMax returns the end of a value axis that starts at 0 and shows every run's value of
// f with room for its label.
func axisMax(runs []run, f func(run) float64) float64 {
	hi := 0.0
	for _, r := range runs {
		if v := f(r); finite(v) {
			hi = math.Max(hi, v)
		}
	}
	if hi == 0 {
		return 1 // an axis from 0 to 0 would be meaningless; all bars are empty anyway
	}
	return hi * headroom
}

// formatValue writes a bar's value with about three significant digits and no exponent,
// which reads better on a bar than 1.23e+03 or 2.000.
func formatValue(v float64) string {
	if math.Abs(v) >= 1000 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	rounded, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	if err != nil {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	return plainNumber(rounded)
}

// stepPart is one part of a step's time in the breakdown.
type stepPart struct {
	name  string
	color color.Color
	of    func(trainer.StepMS) float64
}

// stepParts lists the parts in the order they stack. They are shades of grey so that they
// do not read as pipelines, whose colours the other plots use.
func stepParts() []stepPart {
	return []stepPart{
		{"compute", color.Gray{0x40}, func(s trainer.StepMS) float64 { return s.Compute }},
		{"selection", color.Gray{0x80}, func(s trainer.StepMS) float64 { return s.Sparsify }},
		{"comm", color.Gray{0xB0}, func(s trainer.StepMS) float64 { return s.Comm }},
		{"wait", color.Gray{0xDC}, func(s trainer.StepMS) float64 { return s.Wait }},
	}
}

func breakdownPainter(runs []run) painter {
	return func(dc draw.Canvas) error {
		parts := stepParts()
		// Selection and communication run beside backward, so the parts can add up to more
		// than the step took; a mark shows the step's wall time.
		p := newPlot("Mean time per step (selection and comm can overlap compute)", "ms per step", "")
		p.Y.Min, p.Y.Max = -0.5, float64(len(runs))-0.5
		nominalCells(p, runs)
		p.X.Min, p.X.Max = 0, axisMax(runs, func(r run) float64 {
			return math.Max(r.summary.Throughput.StepMS.Total, partsSum(parts, r.summary.Throughput.StepMS))
		})
		p.Add(gridLines(true, false))

		legend := newLegend(swatchThumbnail)
		for _, part := range parts {
			legend.Add(part.name, swatch{part.color})
		}
		plotArea, legendArea := besideLegend(dc, p, &legend)
		width := barWidth(p.DataCanvas(plotArea), len(runs))
		var below *plotter.BarChart
		for _, part := range parts {
			values := make(plotter.Values, len(runs))
			for i, r := range runs {
				values[cellPosition(i, len(runs))] = part.of(r.summary.Throughput.StepMS)
			}
			bars, err := plotter.NewBarChart(values, width)
			if err != nil {
				return err
			}
			bars.Horizontal = true
			bars.Color = part.color
			// A white outline parts the segments, so that the light ones stay visible.
			bars.LineStyle = draw.LineStyle{Color: color.White, Width: vg.Points(0.5)}
			if below != nil {
				bars.StackOn(below)
			}
			p.Add(bars)
			below = bars
		}
		wall, err := wallMarks(runs, width)
		if err != nil {
			return err
		}
		p.Add(wall)
		legend.Add("wall time", strokeThumbnail{})
		for i, r := range runs {
			ms := r.summary.Throughput.StepMS
			end := math.Max(ms.Total, partsSum(parts, ms))
			err := addLabel(p, plotter.XY{X: end, Y: float64(cellPosition(i, len(runs)))},
				formatValue(ms.Total)+" ms", valueStyle(draw.XLeft, draw.YCenter), vg.Point{X: vg.Points(4)})
			if err != nil {
				return err
			}
		}
		p.Draw(plotArea)
		legend.Draw(legendArea)
		return nil
	}
}

func partsSum(parts []stepPart, ms trainer.StepMS) float64 {
	sum := 0.0
	for _, part := range parts {
		sum += part.of(ms)
	}
	return sum
}

// wallMarks marks each run's mean wall time per step with a vertical stroke across its bar.
func wallMarks(runs []run, width vg.Length) (*plotter.Scatter, error) {
	xys := make(plotter.XYs, len(runs))
	for i, r := range runs {
		xys[i] = plotter.XY{X: r.summary.Throughput.StepMS.Total, Y: float64(cellPosition(i, len(runs)))}
	}
	marks, err := plotter.NewScatter(xys)
	if err != nil {
		return nil, err
	}
	marks.GlyphStyle = draw.GlyphStyle{Color: color.Black, Radius: width * 0.65, Shape: strokeGlyph{}}
	return marks, nil
}

// strokeGlyph is a vertical stroke as tall as the glyph's diameter.
type strokeGlyph struct{}

func (strokeGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	line := draw.LineStyle{Color: sty.Color, Width: vg.Points(2)}
	c.StrokeLine2(line, pt.X, pt.Y-sty.Radius, pt.X, pt.Y+sty.Radius)
}

// strokeThumbnail is the legend's picture of the wall-time mark.
type strokeThumbnail struct{}

func (strokeThumbnail) Thumbnail(c *draw.Canvas) {
	x := c.Min.X + (c.Max.X-c.Min.X)/2
	c.StrokeLine2(draw.LineStyle{Color: color.Black, Width: vg.Points(2)}, x, c.Min.Y, x, c.Max.Y)
}

func trafficPainter(runs []run) painter {
	return func(dc draw.Canvas) error {
		kb := func(r run) float64 { return deref(r.summary.Traffic.BytesSentPerStep) / 1000 }
		missing := func(r run) float64 { return deref(r.summary.Sparsity.TensorsMissingPerStep) }
		// Short titles: each panel has half the width, less the row names.
		sent := cellBarPlot(runs, "Bytes sent", "KB per step", withSpread(kb))
		lost := cellBarPlot(runs, "Tensors missing", "tensors per step", withSpread(missing))
		// The panels share the cells' rows, so only the left one names them.
		lost.Y.Tick.Marker = plot.ConstantTicks(nil)

		leftArea, rightArea := sideBySide(dc, sent, lost, 6*vg.Millimeter)
		panels := []struct {
			plot  *plot.Plot
			area  draw.Canvas
			value func(run) float64
		}{{sent, leftArea, kb}, {lost, rightArea, missing}}
		for _, panel := range panels {
			width := barWidth(panel.plot.DataCanvas(panel.area), len(runs))
			for i, r := range runs {
				v := panel.value(r)
				err := addBar(panel.plot, barSpec{at: float64(cellPosition(i, len(runs))), value: v, spread: spread(r, panel.value),
					width: width, color: r.look.color, label: formatValue(v), horizontal: true})
				if err != nil {
					return err
				}
			}
			panel.plot.Draw(panel.area)
		}
		return nil
	}
}

// sideBySide splits dc between two plots that share their rows, so that their data areas
// get the same width: the left plot's row names take their room first. (plot.Align would
// give each plot the same total width and push the right one's title off the image.)
func sideBySide(dc draw.Canvas, left, right *plot.Plot, gap vg.Length) (leftArea, rightArea draw.Canvas) {
	total := dc.Max.X - dc.Min.X
	overhead := func(p *plot.Plot) vg.Length {
		data := p.DataCanvas(dc)
		return total - (data.Max.X - data.Min.X)
	}
	leftOverhead := overhead(left)
	dataWidth := (total - gap - leftOverhead - overhead(right)) / 2
	leftWidth := leftOverhead + dataWidth
	return draw.Crop(dc, 0, -(total - leftWidth), 0, 0), draw.Crop(dc, leftWidth+gap, 0, 0, 0)
}

// cellBarPlot returns a plot with a row per run, ready for horizontal bars of f.
func cellBarPlot(runs []run, title, xLabel string, f func(run) float64) *plot.Plot {
	p := newPlot(title, xLabel, "")
	p.Y.Min, p.Y.Max = -0.5, float64(len(runs))-0.5
	nominalCells(p, runs)
	p.X.Min, p.X.Max = 0, axisMax(runs, f)
	p.Add(gridLines(true, false))
	return p
}

// nominalCells names the rows of a horizontal bar plot after the runs, the first on top.
func nominalCells(p *plot.Plot, runs []run) {
	names := make([]string, len(runs))
	for i, r := range runs {
		names[cellPosition(i, len(runs))] = r.label
	}
	p.NominalY(names...)
	// Shrink the names when the rows get too close for the default size to stay apart.
	row := (figureHeight - 3*vg.Centimeter) / vg.Length(len(runs))
	p.Y.Tick.Label.Font.Size = min(p.Y.Tick.Label.Font.Size, 0.8*row)
}

// cellPosition is where run i of n sits on a nominal y axis, whose 0 is at the bottom:
// reading top down then follows the order of the cells.
func cellPosition(i, n int) int { return n - 1 - i }

// barWidth sizes horizontal bars to fill their row of the data area.
func barWidth(data draw.Canvas, rows int) vg.Length {
	return min(barFill*(data.Max.Y-data.Min.Y)/vg.Length(rows), maxBarWidth)
}

func deref(v *float64) float64 {
	if v == nil {
		return 0
	}
	return *v
}
