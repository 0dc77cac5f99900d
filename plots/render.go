package plots

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Every figure has the same size, fit for a page or a slide, and is rendered at a
// resolution that keeps small legend text sharp.
const (
	figureWidth  = 16 * vg.Centimeter
	figureHeight = 10 * vg.Centimeter
	figureDPI    = 150
	figureMargin = 2 * vg.Millimeter
)

// Text sizes: legends and value labels are smaller than gonum's defaults (12 and 10
// points) so that long cell labels fit. A point is 1/72 inch.
const (
	legendFontSize = 9 * vg.Inch / 72
	valueFontSize  = 8 * vg.Inch / 72
)

// painter draws one figure onto the whole canvas.
type painter func(dc draw.Canvas) error

// renderPNG paints a figure on a white canvas and encodes it as PNG.
func renderPNG(paint painter) (png []byte, err error) {
	// gonum/plot panics on some degenerate input (a log axis over zero, an empty nominal
	// axis). The painters guard against those they know of; this turns any other into an
	// error instead of taking the caller down.
	defer func() {
		if r := recover(); r != nil {
			png, err = nil, fmt.Errorf("plot library: %v", r)
		}
	}()
	c := vgimg.NewWith(vgimg.UseWH(figureWidth, figureHeight), vgimg.UseDPI(figureDPI),
		vgimg.UseBackgroundColor(color.White))
	dc := draw.New(c)
	if err := paint(draw.Crop(dc, figureMargin, -figureMargin, figureMargin, -figureMargin)); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("encoding PNG: %w", err)
	}
	return buf.Bytes(), nil
}

// newPlot returns a plot with the given title and axis labels.
func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = 3 * vg.Millimeter
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.X.Tick.Marker = plainTicks{}
	p.Y.Tick.Marker = plainTicks{}
	return p
}

// plainTicks places ticks as gonum's default does but labels them with as few digits as the
// value needs: the default gives every label the precision of the finest one, so that a
// step of 2.5 turns 5000 into "5000.00".
type plainTicks struct{}

func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i, t := range ticks {
		if t.Label != "" {
			ticks[i].Label = plainNumber(t.Value)
		}
	}
	return ticks
}

// plainNumber writes v without trailing zeros, and without the float noise (0.30000000000000004)
// that tick arithmetic leaves, by rounding to 12 significant digits first.
func plainNumber(v float64) string {
	rounded, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 12, 64), 64)
	if err != nil {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	if a := math.Abs(rounded); a != 0 && (a < 1e-4 || a >= 1e9) {
		return strconv.FormatFloat(rounded, 'g', -1, 64)
	}
	return strconv.FormatFloat(rounded, 'f', -1, 64)
}

// Legend thumbnails: wide enough for lines to show their dash pattern, square for bars.
const (
	lineThumbnail   = 9 * vg.Millimeter
	swatchThumbnail = 3 * vg.Millimeter
)

// newLegend returns an empty legend, for drawing beside a plot, with thumbnails of the
// given width.
func newLegend(thumbnailWidth vg.Length) plot.Legend {
	l := plot.NewLegend()
	l.Top, l.Left = true, true
	l.TextStyle.Font = font.From(plot.DefaultFont, legendFontSize)
	l.ThumbnailWidth = thumbnailWidth
	l.Padding = vg.Points(2)
	return l
}

// besideLegend splits dc into the canvas for the plot and the column on its right for the
// legend. The legend goes outside the plot because inside it would hide lines and bars.
// The legend's top lines up with the top of the plot's data area, below the title.
func besideLegend(dc draw.Canvas, p *plot.Plot, l *plot.Legend) (plotArea, legendArea draw.Canvas) {
	r := l.Rectangle(dc)
	width := r.Max.X - r.Min.X
	if width == 0 {
		return dc, draw.Crop(dc, dc.Max.X-dc.Min.X, 0, 0, 0)
	}
	// The measured width of legend text falls a little short of the drawn glyphs: keep a
	// margin at the right edge so that the longest label is not clipped.
	gap, margin := 3*vg.Millimeter, 2*vg.Millimeter
	plotArea = draw.Crop(dc, 0, -(width + gap + margin), 0, 0)
	legendArea = draw.Crop(dc, dc.Max.X-dc.Min.X-width-margin, -margin, 0, 0)
	if p.Title.Text != "" {
		title := p.Title.TextStyle.Rectangle(p.Title.Text)
		legendArea = draw.Crop(legendArea, 0, 0, 0, -(title.Max.Y - title.Min.Y + p.Title.Padding))
	}
	return plotArea, legendArea
}

// drawWithLegend draws p with l beside it.
func drawWithLegend(dc draw.Canvas, p *plot.Plot, l *plot.Legend) {
	plotArea, legendArea := besideLegend(dc, p, l)
	p.Draw(plotArea)
	l.Draw(legendArea)
}

// swatch is a legend thumbnail for bars: a filled square of one colour.
type swatch struct{ color color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	side := min(c.Max.Y-c.Min.Y, c.Max.X-c.Min.X)
	r := vg.Rectangle{Min: c.Min, Max: vg.Point{X: c.Min.X + side, Y: c.Min.Y + side}}
	c.SetColor(s.color)
	c.Fill(r.Path())
}

// gridLines returns light grid lines: vertical ones at the x ticks, horizontal ones at the
// y ticks, as asked. Bar plots ask only for lines across the value axis; lines along a
// nominal axis would cut through the bars.
func gridLines(vertical, horizontal bool) *plotter.Grid {
	g := plotter.NewGrid()
	g.Vertical.Color, g.Horizontal.Color = nil, nil
	if vertical {
		g.Vertical.Color = color.Gray{0xDD}
	}
	if horizontal {
		g.Horizontal.Color = color.Gray{0xDD}
	}
	return g
}

// valueStyle is the text style of the numbers written on bars.
func valueStyle(xAlign draw.XAlignment, yAlign draw.YAlignment) text.Style {
	return text.Style{
		Color:   color.Gray{0x33},
		Font:    font.From(plot.DefaultFont, valueFontSize),
		XAlign:  xAlign,
		YAlign:  yAlign,
		Handler: plot.DefaultTextHandler,
	}
}

// addLabel writes text at the data point at, shifted by offset, in style.
func addLabel(p *plot.Plot, at plotter.XY, text string, style text.Style, offset vg.Point) error {
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{at}, Labels: []string{text}})
	if err != nil {
		return err
	}
	l.TextStyle[0] = style
	l.Offset = offset
	p.Add(l)
	return nil
}
