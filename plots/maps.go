package plots

import (
	"errors"
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// A Grid is a value at every point of a map over two constants: Z[r][c] at (X[c], Y[r]).
// Log axes are drawn at log10 of the values, so that a map over 1 to 400 Gbit/s gives
// each decade the same width.
type Grid struct {
	X, Y           []float64
	Z              [][]float64
	LogX, LogY     bool
	XLabel, YLabel string
	// XName and YName write a value of each axis for its ticks ("10Gbit").
	XName, YName func(float64) string
}

// A Mark is a named point drawn on a map.
type Mark struct {
	Label string
	X, Y  float64
}

// gridXYZ is g in the plotter's terms, at the axes' drawn positions.
type gridXYZ struct{ g Grid }

func (s gridXYZ) Dims() (c, r int)   { return len(s.g.X), len(s.g.Y) }
func (s gridXYZ) Z(c, r int) float64 { return s.g.Z[r][c] }
func (s gridXYZ) X(c int) float64    { return position(s.g.X[c], s.g.LogX) }
func (s gridXYZ) Y(r int) float64    { return position(s.g.Y[r], s.g.LogY) }

func position(v float64, log bool) float64 {
	if log {
		return math.Log10(v)
	}
	return v
}

func (g Grid) check() error {
	if len(g.X) < 2 || len(g.Y) < 2 || len(g.Z) != len(g.Y) {
		return fmt.Errorf("a map needs at least 2x2 points and a row of values per y, got %d x, %d y, %d rows", len(g.X), len(g.Y), len(g.Z))
	}
	for _, row := range g.Z {
		if len(row) != len(g.X) {
			return errors.New("a map's rows must each have a value per x")
		}
	}
	for _, v := range append(append([]float64(nil), g.X...), g.Y...) {
		if (g.LogX || g.LogY) && !(v > 0) {
			return fmt.Errorf("a log axis cannot show %g", v)
		}
	}
	return nil
}

// GainMap draws g's values (fractions: 0.25 is +25%) as a heat map, blue below zero and
// red above (full colour at the largest value, or at twice band if that is larger), each cell labelled with its value in percent, with a black contour at zero,
// dashed ones at ±band (the error inside which a value is no verdict; 0 for none), and
// marks.
func GainMap(path, title string, g Grid, band float64, marks []Mark) error {
	if err := g.check(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return writeFigure(path, func(dc draw.Canvas) error {
		p, err := mapPlot(title, g)
		if err != nil {
			return err
		}
		limit := 0.0
		for _, row := range g.Z {
			for _, v := range row {
				if !math.IsNaN(v) {
					limit = math.Max(limit, math.Abs(v))
				}
			}
		}
		// Values inside the band are no verdict: they stay pale.
		limit = math.Max(limit, math.Max(2*band, 0.01))
		h := plotter.NewHeatMap(gridXYZ{g}, diverging(21))
		h.Min, h.Max = -limit, limit
		h.NaN = color.Gray{0xCC}
		p.Add(h)
		for _, level := range []struct {
			at     float64
			dashed bool
		}{{0, false}, {band, true}, {-band, true}} {
			if level.dashed && band <= 0 {
				continue
			}
			c := plotter.NewContour(gridXYZ{g}, []float64{level.at}, fixedPalette{color.Black})
			c.LineStyles[0].Width = vg.Points(1.5)
			if level.dashed {
				c.LineStyles[0].Width = vg.Points(1)
				c.LineStyles[0].Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			p.Add(c)
		}
		if err := cellLabels(p, g, func(v float64) string { return fmt.Sprintf("%+.0f%%", 100*v) }); err != nil {
			return err
		}
		if err := addMarks(p, g, marks); err != nil {
			return err
		}
		p.Draw(dc)
		return nil
	})
}

// RegionMap draws which of names is at each point of g (whose values are indices into
// names) in one colour per name, each cell labelled with its name, with marks and a
// legend.
func RegionMap(path, title string, g Grid, names []string, marks []Mark) error {
	if err := g.check(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(names) == 0 {
		return fmt.Errorf("%s: a region map needs names", path)
	}
	return writeFigure(path, func(dc draw.Canvas) error {
		p, err := mapPlot(title, g)
		if err != nil {
			return err
		}
		colors := nameColors(names)
		h := plotter.NewHeatMap(gridXYZ{g}, fixedPalette(colors))
		h.Min, h.Max = 0, float64(max(len(names)-1, 1))
		if len(names) == 1 {
			h.Max = 1
			colors = append(colors, colors[0])
			h.Palette = fixedPalette(colors)
		}
		p.Add(h)
		if err := cellLabels(p, g, func(v float64) string { return names[int(v)] }); err != nil {
			return err
		}
		if err := addMarks(p, g, marks); err != nil {
			return err
		}
		legend := newLegend(swatchThumbnail)
		for i, n := range names {
			legend.Add(n, swatch{colors[i]})
		}
		drawWithLegend(dc, p, &legend)
		return nil
	})
}

// mapPlot is a plot with g's axes: its ticks at g's values, written by XName and YName.
func mapPlot(title string, g Grid) (*plot.Plot, error) {
	p := newPlot(title, g.XLabel, g.YLabel)
	p.X.Tick.Marker = valueAtTicks(g.X, g.LogX, g.XName)
	p.Y.Tick.Marker = valueAtTicks(g.Y, g.LogY, g.YName)
	return p, nil
}

// valueAtTicks ticks an axis at each of values (thinned to at most 8 labels).
func valueAtTicks(values []float64, log bool, name func(float64) string) plot.TickerFunc {
	return func(min, max float64) []plot.Tick {
		step := (len(values) + 7) / 8
		var ticks []plot.Tick
		for i, v := range values {
			label := ""
			if i%step == 0 {
				label = name(v)
			}
			ticks = append(ticks, plot.Tick{Value: position(v, log), Label: label})
		}
		return ticks
	}
}

// cellLabels writes text(z) at the centre of every cell of g that holds a number.
func cellLabels(p *plot.Plot, g Grid, text func(float64) string) error {
	var xys plotter.XYs
	var labels []string
	for r, y := range g.Y {
		for c, x := range g.X {
			if v := g.Z[r][c]; !math.IsNaN(v) {
				xys = append(xys, plotter.XY{X: position(x, g.LogX), Y: position(y, g.LogY)})
				labels = append(labels, text(v))
			}
		}
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return err
	}
	for i := range l.TextStyle {
		l.TextStyle[i] = valueStyle(draw.XCenter, draw.YCenter)
	}
	p.Add(l)
	return nil
}

// addMarks draws each mark as a ring with its label beside it.
func addMarks(p *plot.Plot, g Grid, marks []Mark) error {
	for _, m := range marks {
		at := plotter.XY{X: position(m.X, g.LogX), Y: position(m.Y, g.LogY)}
		s, err := plotter.NewScatter(plotter.XYs{at})
		if err != nil {
			return err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: color.Black, Radius: vg.Points(5), Shape: draw.CircleGlyph{}}
		p.Add(s)
		style := valueStyle(draw.XLeft, draw.YCenter)
		style.Color = color.Black
		if err := addLabel(p, at, m.Label, style, vg.Point{X: vg.Points(7)}); err != nil {
			return err
		}
	}
	return nil
}

// diverging is n colours from blue through white to red.
func diverging(n int) palette.Palette {
	blue, red := color.RGBA{0x3B, 0x4C, 0xC0, 0xFF}, color.RGBA{0xB4, 0x04, 0x26, 0xFF}
	colors := make([]color.Color, n)
	for i := range colors {
		// -1 .. 1, kept to 70% of full colour so that the labels stay readable
		t := 0.7 * (2*float64(i)/float64(n-1) - 1)
		end := red
		if t < 0 {
			end, t = blue, -t
		}
		mix := func(a uint8) uint8 { return uint8(math.Round(255 + t*(float64(a)-255))) }
		colors[i] = color.RGBA{mix(end.R), mix(end.G), mix(end.B), 0xFF}
	}
	return fixedPalette(colors)
}

type fixedPalette []color.Color

func (p fixedPalette) Colors() []color.Color { return p }
