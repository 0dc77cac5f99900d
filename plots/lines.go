package plots

import (
	"image/color"
	"maps"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// lossWindow is how many steps the loss plot averages over: one step's loss is too noisy to
// tell runs apart. It matches the window of summary.json's final_loss.
const lossWindow = 20

// maxMarkedPoints is the most evaluations a line marks with points; beyond it the points
// would merge into a thick smear that hides the line.
const maxMarkedPoints = 60

// timeAxis is what the x axis of a test-quality plot measures.
type timeAxis int

const (
	byEpoch timeAxis = iota
	byWallClock
)

func (a timeAxis) of(m Metric) float64 {
	if a == byWallClock {
		return m.WallS
	}
	return m.Epoch
}

func (a timeAxis) label() string {
	if a == byWallClock {
		return "wall-clock time (s)"
	}
	return "epoch"
}

func (a timeAxis) phrase() string {
	if a == byWallClock {
		return "wall-clock time"
	}
	return "epoch"
}

// quality is the test figure the first two plots show: accuracy for classifiers, perplexity
// for language models, whose accuracy says little.
type quality struct {
	name       string
	axisLabel  string
	perplexity bool
}

func (q quality) of(m Metric) float64 {
	if q.perplexity {
		return m.EvalPerplexity
	}
	return 100 * m.EvalAccuracy
}

// chooseQuality picks perplexity when any run evaluated it, accuracy otherwise.
func chooseQuality(runs []run) quality {
	for i := range runs {
		for _, r := range members(&runs[i]) {
			for _, m := range r.metrics {
				if m.Kind == kindEval && finite(m.EvalPerplexity) {
					return quality{name: "Test perplexity (lower is better)", axisLabel: "perplexity", perplexity: true}
				}
			}
		}
	}
	return quality{name: "Test accuracy", axisLabel: "accuracy (%)"}
}

// series is the points of one run in a line plot, and for a group of seeds the band
// around them.
type series struct {
	run    *run
	xys    plotter.XYs
	lo, hi plotter.XYs // the band's edges; nil without one
}

func qualityPainter(runs []run, axis timeAxis) painter {
	return func(dc draw.Canvas) error {
		q := chooseQuality(runs)
		all := make([]series, len(runs))
		for i := range runs {
			all[i] = curveOf(&runs[i], func(m []Metric) []stepPoint { return evalPoints(m, axis, q) })
		}
		p := newPlot(q.name+" against "+axis.phrase(), axis.label(), q.axisLabel)
		if q.perplexity && spansDecades(all) {
			// Perplexity falls from about the vocabulary size to tens; on a linear axis the
			// runs' differences near the end would be flattened into one line.
			p.Y.Scale = plot.LogScale{}
			p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
			p.Y.Label.Text += " (log scale)"
		}
		return drawLines(dc, p, all, true)
	}
}

// densityPainter draws the density each sparsifying cell achieved, step by step, against
// its target (a dashed line for each target the cells have): whether a threshold selector
// (ExDyna's) holds the density it is asked for from the first step, or drifts toward it. The
// y axis is logarithmic when the densities span a decade, as a threshold far from the
// gradients' scale makes them.
func densityPainter(runs []run) painter {
	return func(dc draw.Canvas) error {
		var all []series
		targets := map[float64]bool{}
		first, last := math.Inf(1), math.Inf(-1)
		for i := range runs {
			s := curveOf(&runs[i], densityPoints)
			if len(s.xys) == 0 {
				continue
			}
			all = append(all, s)
			if t := runs[i].summary.Sparsity.DensityTarget; t != nil {
				targets[*t] = true
			}
			first, last = math.Min(first, s.xys[0].X), math.Max(last, s.xys[len(s.xys)-1].X)
		}
		p := newPlot("Density achieved per step", "step", "elements sent / elements")
		if spansDecades(all) {
			p.Y.Scale = plot.LogScale{}
			p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
			p.Y.Label.Text += " (log scale)"
		}
		for _, t := range slices.Sorted(maps.Keys(targets)) {
			if err := addLevel(p, t, first, last); err != nil {
				return err
			}
		}
		if len(targets) > 0 {
			p.Title.Text += " (dashed: the target)"
		}
		return drawLines(dc, p, all, false)
	}
}

// imbalancePainter draws, step by step, the partition imbalance of the cells that report
// one (ExDyna's largest partition's selected count over the mean): whether the partitions
// balance out as training goes on. A dashed line marks perfect balance, 1.
func imbalancePainter(runs []run) painter {
	return func(dc draw.Canvas) error {
		var all []series
		first, last := math.Inf(1), math.Inf(-1)
		for i := range runs {
			s := curveOf(&runs[i], imbalancePoints)
			if len(s.xys) == 0 {
				continue
			}
			all = append(all, s)
			first, last = math.Min(first, s.xys[0].X), math.Max(last, s.xys[len(s.xys)-1].X)
		}
		p := newPlot("Partition imbalance per step (dashed: balanced)", "step", "largest partition's count / mean")
		if err := addLevel(p, 1, first, last); err != nil {
			return err
		}
		return drawLines(dc, p, all, false)
	}
}

// imbalancePoints returns the (step, imbalance) points of the training rows that carry one.
func imbalancePoints(metrics []Metric) []stepPoint {
	return trainPoints(metrics, func(m Metric) float64 { return m.Imbalance })
}

// trainPoints returns the (step, figure) points of the training rows whose figure is a
// positive number.
func trainPoints(metrics []Metric, figure func(Metric) float64) []stepPoint {
	var points []stepPoint
	for _, m := range metrics {
		if v := figure(m); m.Kind == kindTrain && finite(v) && v > 0 {
			points = append(points, stepPoint{step: m.Step, xy: plotter.XY{X: float64(m.Step), Y: v}})
		}
	}
	return points
}

// addLevel adds to p a dashed line at y from x first to last, in the target's colour.
func addLevel(p *plot.Plot, y, first, last float64) error {
	line, err := plotter.NewLine(plotter.XYs{{X: first, Y: y}, {X: last, Y: y}})
	if err != nil {
		return err
	}
	line.Color, line.Width, line.Dashes = targetColor, vg.Points(1.5), []vg.Length{vg.Points(6), vg.Points(3)}
	p.Add(line)
	return nil
}

// targetColor draws a target line: a bluish grey that neither text (pure greys) nor the
// pipelines' colours blended with white make.
var targetColor = color.RGBA{R: 90, G: 90, B: 110, A: 255}

// densityPoints returns the (step, density) points of the training rows that carry one.
func densityPoints(metrics []Metric) []stepPoint {
	return trainPoints(metrics, func(m Metric) float64 { return m.Density })
}

// evalPoints returns the (time, quality) points of the evaluation rows, leaving out values
// that are missing or not finite.
func evalPoints(metrics []Metric, axis timeAxis, q quality) []stepPoint {
	var points []stepPoint
	for _, m := range metrics {
		x, y := axis.of(m), q.of(m)
		if m.Kind != kindEval || !finite(x) || !finite(y) {
			continue
		}
		points = append(points, stepPoint{step: m.Step, xy: plotter.XY{X: x, Y: y}})
	}
	return points
}

// spansDecades tells whether all y values are positive (so that a log axis can show them)
// and the largest is at least ten times the smallest.
func spansDecades(all []series) bool {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range all {
		for _, xys := range []plotter.XYs{s.xys, s.lo, s.hi} {
			for _, xy := range xys {
				lo, hi = math.Min(lo, xy.Y), math.Max(hi, xy.Y)
			}
		}
	}
	return lo > 0 && hi >= 10*lo
}

func lossPainter(runs []run) painter {
	return func(dc draw.Canvas) error {
		all := make([]series, len(runs))
		for i := range runs {
			all[i] = curveOf(&runs[i], smoothLoss)
		}
		p := newPlot("Training loss (moving average of 20 steps)", "step", "loss")
		return drawLines(dc, p, all, false)
	}
}

// trainLoss returns the (step, loss) points of the training rows with a finite loss; a
// diverged step would otherwise stretch the axis until the other runs are flat lines.
func trainLoss(metrics []Metric) plotter.XYs {
	var xys plotter.XYs
	for _, m := range metrics {
		if m.Kind == kindTrain && finite(m.Loss) {
			xys = append(xys, plotter.XY{X: float64(m.Step), Y: m.Loss})
		}
	}
	return xys
}

// smoothLoss is the training loss as the loss plot shows it, averaged over lossWindow steps.
func smoothLoss(metrics []Metric) []stepPoint {
	xys := movingAverage(trainLoss(metrics), lossWindow)
	points := make([]stepPoint, len(xys))
	for i, xy := range xys {
		points[i] = stepPoint{step: int(xy.X), xy: xy}
	}
	return points
}

// movingAverage replaces each y by the mean of it and the window-1 points before it (fewer
// at the start).
func movingAverage(xys plotter.XYs, window int) plotter.XYs {
	out := make(plotter.XYs, len(xys))
	sum := 0.0
	for i, xy := range xys {
		sum += xy.Y
		if i >= window {
			sum -= xys[i-window].Y
		}
		out[i] = plotter.XY{X: xy.X, Y: sum / float64(min(i+1, window))}
	}
	return out
}

// drawLines adds a line per series that has points, on its band if it has one, marked with
// points when asked and when there are few enough, and draws p with a legend beside it.
func drawLines(dc draw.Canvas, p *plot.Plot, all []series, withPoints bool) error {
	p.Add(gridLines(true, true))
	legend := newLegend(lineThumbnail)
	drawn, banded := 0, false
	for _, s := range all {
		if len(s.xys) == 0 {
			continue
		}
		var thumbs []plot.Thumbnailer
		if len(s.lo) > 0 {
			shade, err := band(s.lo, s.hi, s.run.look.color)
			if err != nil {
				return err
			}
			p.Add(shade)
			thumbs = append(thumbs, shade)
			banded = true
		}
		line, err := plotter.NewLine(s.xys)
		if err != nil {
			return err
		}
		line.Color = s.run.look.color
		line.Dashes = s.run.look.dashes
		line.Width = vg.Points(1.5)
		p.Add(line)
		thumbs = append(thumbs, line)
		if withPoints && len(s.xys) <= maxMarkedPoints {
			points, err := plotter.NewScatter(s.xys)
			if err != nil {
				return err
			}
			points.GlyphStyle = draw.GlyphStyle{Color: s.run.look.color, Radius: vg.Points(2.5), Shape: s.run.look.glyph}
			p.Add(points)
			thumbs = append(thumbs, points)
		}
		legend.Add(s.run.label, thumbs...)
		drawn++
	}
	if drawn == 0 {
		p.Title.Text += ": no data yet"
	}
	if banded {
		legend.Add(bandLegend)
	}
	drawWithLegend(dc, p, &legend)
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
