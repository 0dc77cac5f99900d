package plots

import (
	"cmp"
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Estimate is one point of a Tradeoff chart: a cost on x, and on y a mean with its interval.
type Estimate struct {
	Name string // in the legend
	// Pipeline gives the point its pipeline's colour; points of one pipeline differ in
	// shape. "" colours the point by its name.
	Pipeline  string
	X         float64
	Y, Lo, Hi float64 // the mean and its interval's ends
}

// Tradeoff draws a PNG chart at path with one point per estimate, each with a vertical bar
// over its interval, on a logarithmic x axis: what each pipeline reached for what it paid,
// such as accuracy against bytes sent, where costs span orders of magnitude.
//
// Invalid input (no estimates, a value that is NaN or infinite, x not positive, an
// interval that does not hold its mean) is an error naming the estimate, and nothing is
// written.
func Tradeoff(path, title, xLabel, yLabel string, points []Estimate) error {
	if err := checkEstimates(points); err != nil {
		return fmt.Errorf("plotting %s: %w", path, err)
	}
	return writeFigure(path, func(dc draw.Canvas) error {
		p, legend, err := tradeoffPlot(title, xLabel, yLabel, points)
		if err != nil {
			return err
		}
		drawWithLegend(dc, p, &legend)
		return nil
	})
}

func checkEstimates(points []Estimate) error {
	if len(points) == 0 {
		return fmt.Errorf("no points to plot")
	}
	for i, e := range points {
		name := e.Name
		if name == "" {
			name = fmt.Sprintf("point %d", i)
		}
		for _, v := range []float64{e.X, e.Y, e.Lo, e.Hi} {
			if !finite(v) {
				return fmt.Errorf("%s: (%g, %g in [%g, %g]); values must be finite", name, e.X, e.Y, e.Lo, e.Hi)
			}
		}
		switch {
		case e.X <= 0:
			return fmt.Errorf("%s: x = %g; a log x axis needs x > 0", name, e.X)
		case e.Lo > e.Y || e.Y > e.Hi:
			return fmt.Errorf("%s: the interval [%g, %g] does not hold the mean %g", name, e.Lo, e.Hi, e.Y)
		}
	}
	return nil
}

func tradeoffPlot(title, xLabel, yLabel string, points []Estimate) (*plot.Plot, plot.Legend, error) {
	p := newPlot(title, xLabel, yLabel)
	p.Add(gridLines(true, true))
	legend := newLegend(0)
	keys := make([]string, len(points))
	for i, e := range points {
		keys[i] = cmp.Or(e.Pipeline, e.Name)
	}
	colors := nameColors(keys)
	shapes := []draw.GlyphDrawer{draw.CircleGlyph{}, draw.TriangleGlyph{}, draw.SquareGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{}, draw.RingGlyph{}}
	seen := map[string]int{}
	for i, e := range points {
		shape := shapes[seen[keys[i]]%len(shapes)]
		seen[keys[i]]++
		xy := plotter.XYs{{X: e.X, Y: e.Y}}
		dot, err := plotter.NewScatter(xy)
		if err != nil {
			return nil, legend, err
		}
		dot.GlyphStyle = draw.GlyphStyle{Color: colors[i], Radius: vg.Points(3), Shape: shape}
		bars, err := plotter.NewYErrorBars(struct {
			plotter.XYer
			plotter.YErrorer
		}{xy, plotter.YErrors{{Low: e.Y - e.Lo, High: e.Hi - e.Y}}})
		if err != nil {
			return nil, legend, err
		}
		bars.LineStyle.Color, bars.LineStyle.Width = colors[i], vg.Points(1.2)
		p.Add(bars, dot)
		legend.Add(e.Name, dot)
	}
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	// A lone x, or several equal, would give the log axis no range.
	if p.X.Min == p.X.Max {
		p.X.Min, p.X.Max = p.X.Min/2, p.X.Max*2
	}
	return p, legend, nil
}
