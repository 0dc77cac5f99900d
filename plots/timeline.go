package plots

import (
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Timeline draws the Chrome trace at tracePath (what the trainer's --timeline-steps
// records) as a PNG at pngPath: a row per thread of the trace, a bar per event over its
// time, so that one sees which work overlapped which. Events of zero length show as thin
// bars.
func Timeline(tracePath, pngPath, title string) error {
	lanes, bars, err := readTrace(tracePath)
	if err != nil {
		return err
	}
	return writeFigure(pngPath, func(dc draw.Canvas) error {
		p := newPlot(title, "time (ms)", "")
		p.Add(gridLines(true, false))
		p.Add(&gantt{bars: bars, colors: nameColors(lanes)})
		p.Y.Min, p.Y.Max = -0.5, float64(len(lanes))-0.5
		ticks := make([]plot.Tick, len(lanes))
		for i, l := range lanes {
			ticks[i] = plot.Tick{Value: float64(i), Label: l}
		}
		p.Y.Tick.Marker = plot.ConstantTicks(ticks)
		p.Draw(dc)
		return nil
	})
}

// bar is one event: its row and its interval in milliseconds.
type bar struct {
	row        int
	start, end float64
}

// readTrace reads the rows (threads, by their names) and events of a Chrome trace.
func readTrace(path string) ([]string, []bar, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the timeline: %w", err)
	}
	var trace struct {
		TraceEvents []struct {
			Ph   string  `json:"ph"`
			TS   float64 `json:"ts"`
			Dur  float64 `json:"dur"`
			TID  int     `json:"tid"`
			Args struct {
				Name string `json:"name"`
			} `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(raw, &trace); err != nil {
		return nil, nil, fmt.Errorf("reading the timeline %s: %w", path, err)
	}
	names := map[int]string{}
	var bars []bar
	for _, e := range trace.TraceEvents {
		switch e.Ph {
		case "M":
			names[e.TID] = e.Args.Name
		case "X":
			if !finite(e.TS) || !finite(e.Dur) || e.Dur < 0 {
				return nil, nil, fmt.Errorf("the timeline %s has an event at %g µs lasting %g µs", path, e.TS, e.Dur)
			}
			bars = append(bars, bar{row: e.TID, start: e.TS / 1000, end: (e.TS + e.Dur) / 1000})
		}
	}
	if len(bars) == 0 {
		return nil, nil, fmt.Errorf("the timeline %s holds no event", path)
	}
	// Rows in the order of their thread numbers; a thread without a name goes by its number.
	var tids []int
	for tid := range names {
		tids = append(tids, tid)
	}
	for _, b := range bars {
		if !slices.Contains(tids, b.row) {
			tids = append(tids, b.row)
		}
	}
	slices.Sort(tids)
	lanes := make([]string, len(tids))
	for i, tid := range tids {
		lanes[i] = names[tid]
		if lanes[i] == "" {
			lanes[i] = fmt.Sprintf("thread %d", tid)
		}
	}
	// The chart's rows run top-down in that order.
	for i := range bars {
		bars[i].row = len(tids) - 1 - slices.Index(tids, bars[i].row)
	}
	slices.Reverse(lanes)
	return lanes, bars, nil
}

// gantt is a gonum plotter of bars on rows.
type gantt struct {
	bars   []bar
	colors []color.Color
}

func (g *gantt) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	half := (trY(1) - trY(0)) * 0.35
	for _, b := range g.bars {
		x0, x1, y := trX(b.start), trX(b.end), trY(float64(b.row))
		if x1-x0 < vg.Points(0.5) {
			x1 = x0 + vg.Points(0.5)
		}
		c.FillPolygon(g.colors[b.row%len(g.colors)], []vg.Point{{X: x0, Y: y - half}, {X: x1, Y: y - half}, {X: x1, Y: y + half}, {X: x0, Y: y + half}})
	}
}

// DataRange implements plot.DataRanger: the bars' span in time, every row.
func (g *gantt) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = g.bars[0].start, g.bars[0].end
	for _, b := range g.bars {
		xmin, xmax = min(xmin, b.start), max(xmax, b.end)
	}
	return xmin, xmax, 0, 0
}
