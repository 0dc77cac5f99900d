package plots

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/ssfusion/ssfusion/trainer"
)

// bandLegend explains the shaded bands around the lines of pooled seeds.
const bandLegend = "bands: min to max of the seeds"

// poolSeeds replaces the runs of each group (Cell.Group) by one run that stands for them,
// where the group first appears: its summary is their mean, and it keeps them as its seeds
// for the curves and the spread. Runs without a group stay as they are.
func poolSeeds(runs []run) []run {
	var out []run
	at := map[string]int{}
	for _, r := range runs {
		if r.Group == "" {
			out = append(out, r)
			continue
		}
		i, ok := at[r.Group]
		if !ok {
			i = len(out)
			at[r.Group] = i
			out = append(out, run{Cell: Cell{Name: r.Group, Pipeline: r.Pipeline, Setting: r.Setting, Group: r.Group}})
		}
		out[i].seeds = append(out[i].seeds, r)
	}
	for i := range out {
		if r := &out[i]; r.seeds != nil {
			r.summary = meanSummary(r.seeds)
			r.label = fmt.Sprintf("%s (n=%d)", label(r.Cell), len(r.seeds))
		}
	}
	return out
}

// pooled reports whether some run stands for several seeds.
func pooled(runs []run) bool {
	for _, r := range runs {
		if len(r.seeds) > 1 {
			return true
		}
	}
	return false
}

// members are the runs r stands for: its seeds, or r itself.
func members(r *run) []run {
	if r.seeds != nil {
		return r.seeds
	}
	return []run{*r}
}

// meanSummary is the mean of the figures the bar plots show, over runs.
func meanSummary(runs []run) trainer.Summary {
	n := float64(len(runs))
	var s trainer.Summary
	s.Pipeline = runs[0].summary.Pipeline
	ms := &s.Throughput.StepMS
	for _, r := range runs {
		t := r.summary.Throughput
		s.Throughput.SamplesPerS += t.SamplesPerS / n
		ms.Total += t.StepMS.Total / n
		ms.Compute += t.StepMS.Compute / n
		ms.Sparsify += t.StepMS.Sparsify / n
		ms.Comm += t.StepMS.Comm / n
		ms.Wait += t.StepMS.Wait / n
	}
	s.Traffic.BytesSentPerStep = meanOf(runs, func(s trainer.Summary) *float64 { return s.Traffic.BytesSentPerStep })
	s.Sparsity.TensorsMissingPerStep = meanOf(runs, func(s trainer.Summary) *float64 { return s.Sparsity.TensorsMissingPerStep })
	s.Sparsity.DensityTarget = runs[0].summary.Sparsity.DensityTarget // the seeds share their settings
	return s
}

// meanOf averages f over the runs that have it; nil when none has.
func meanOf(runs []run, f func(trainer.Summary) *float64) *float64 {
	var xs []float64
	for _, r := range runs {
		if v := f(r.summary); v != nil {
			xs = append(xs, *v)
		}
	}
	if len(xs) == 0 {
		return nil
	}
	m := stat.Mean(xs, nil)
	return &m
}

// spread is the sample standard deviation of f over the seeds r pools; 0 for a lone run,
// whose bar has no error bar.
func spread(r run, f func(run) float64) float64 {
	if len(r.seeds) < 2 {
		return 0
	}
	xs := make([]float64, len(r.seeds))
	for i, s := range r.seeds {
		xs[i] = f(s)
	}
	return stat.StdDev(xs, nil)
}

// withSpread is f with the spread of r's seeds added, where an axis must reach.
func withSpread(f func(run) float64) func(run) float64 {
	return func(r run) float64 { return f(r) + spread(r, f) }
}

// stepPoint is a point of a curve with the step it was measured at, by which the curves of
// a group's seeds line up: their wall-clock times differ.
type stepPoint struct {
	step int
	xy   plotter.XY
}

// curveOf is the series of r from the points that points picks of a run's metrics. For a
// group it is the mean of its seeds, point by point, at the steps every seed has (a seed
// that stopped early ends the line rather than shift the mean), with the band from the
// lowest to the highest seed.
func curveOf(r *run, points func([]Metric) []stepPoint) series {
	if r.seeds == nil {
		var xys plotter.XYs
		for _, p := range points(r.metrics) {
			xys = append(xys, p.xy)
		}
		return series{run: r, xys: xys}
	}
	curves := make([][]stepPoint, len(r.seeds))
	for i := range r.seeds {
		curves[i] = points(r.seeds[i].metrics)
	}
	mean, lo, hi := poolCurves(curves)
	s := series{run: r, xys: mean}
	if len(r.seeds) > 1 {
		s.lo, s.hi = lo, hi
	}
	return s
}

// poolCurves returns, at each step that every curve has (in the first curve's order), the
// mean point and the lowest and highest y.
func poolCurves(curves [][]stepPoint) (mean, lo, hi plotter.XYs) {
	byStep := make([]map[int]plotter.XY, len(curves))
	for i, c := range curves {
		byStep[i] = make(map[int]plotter.XY, len(c))
		for _, p := range c {
			byStep[i][p.step] = p.xy
		}
	}
	done := map[int]bool{}
	for _, p := range curves[0] {
		if done[p.step] {
			continue
		}
		done[p.step] = true
		xs, ys := make([]float64, 0, len(curves)), make([]float64, 0, len(curves))
		for _, m := range byStep {
			if xy, ok := m[p.step]; ok {
				xs, ys = append(xs, xy.X), append(ys, xy.Y)
			}
		}
		if len(ys) < len(curves) {
			continue
		}
		x, y := stat.Mean(xs, nil), stat.Mean(ys, nil)
		mean = append(mean, plotter.XY{X: x, Y: y})
		lo = append(lo, plotter.XY{X: x, Y: minOf(ys)})
		hi = append(hi, plotter.XY{X: x, Y: maxOf(ys)})
	}
	return mean, lo, hi
}

func minOf(xs []float64) float64 {
	m := math.Inf(1)
	for _, x := range xs {
		m = math.Min(m, x)
	}
	return m
}

func maxOf(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = math.Max(m, x)
	}
	return m
}

// band is the shaded area between lo and hi, in a light tint of c.
func band(lo, hi plotter.XYs, c color.Color) (*plotter.Polygon, error) {
	ring := make(plotter.XYs, 0, len(lo)+len(hi))
	ring = append(ring, hi...)
	for i := len(lo) - 1; i >= 0; i-- {
		ring = append(ring, lo[i])
	}
	poly, err := plotter.NewPolygon(ring)
	if err != nil {
		return nil, err
	}
	r, g, b, _ := c.RGBA()
	poly.Color = color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: 0x40}
	poly.LineStyle.Width = 0
	return poly, nil
}

// errorBar marks the spread of a bar's seeds: a line with caps from the bar's value less
// the spread (not below zero, where the value axis starts) to the value plus the spread.
// It is drawn at the bar's offset, a page length that gonum's own error bars cannot take.
type errorBar struct {
	at, value, spread float64
	offset            vg.Length
	horizontal        bool
}

func (e errorBar) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	style := draw.LineStyle{Color: color.Black, Width: vg.Points(1)}
	capHalf := vg.Points(2.5)
	from, to := math.Max(e.value-e.spread, 0), e.value+e.spread
	if e.horizontal {
		y := trY(e.at) + e.offset
		x0, x1 := trX(from), trX(to)
		c.StrokeLine2(style, x0, y, x1, y)
		c.StrokeLine2(style, x0, y-capHalf, x0, y+capHalf)
		c.StrokeLine2(style, x1, y-capHalf, x1, y+capHalf)
		return
	}
	x := trX(e.at) + e.offset
	y0, y1 := trY(from), trY(to)
	c.StrokeLine2(style, x, y0, x, y1)
	c.StrokeLine2(style, x-capHalf, y0, x+capHalf, y0)
	c.StrokeLine2(style, x-capHalf, y1, x+capHalf, y1)
}
