// Package plots owns the figures of an experiment: it reads the summary.json and metrics.csv
// that the trainer wrote for each cell of the experiment's matrix and draws PNG plots that
// compare the cells, namely test accuracy (or perplexity) against epoch and wall-clock time,
// training loss, throughput, the step-time breakdown and the traffic per step.
//
// Each pipeline keeps one colour in every plot; cells that differ in their other settings
// are told apart by dash pattern and point shape.
//
// Cells of one Group (the seeds of one setting) are drawn as one: a curve is the mean of
// their curves inside a shaded band from the lowest to the highest seed, and a bar their mean
// with an error bar of one sample standard deviation (the breakdown shows the means alone).
package plots

import (
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/ssfusion/ssfusion/internal/atomicfile"
	"github.com/ssfusion/ssfusion/trainer"
)

// Cell is one training run of an experiment, as the plots see it.
type Cell struct {
	Name     string // the cell's folder name, e.g. "pipeline-ssfusion_density-0.01"
	Pipeline string // e.g. "ssfusion"
	Setting  string // the cell's other matrix values, e.g. "bandwidth-10Mbit"; "" when the matrix varies only the pipeline
	// Group pools the cell with the others of the same Group, such as the seeds of one
	// setting, which then share Pipeline and Setting; "" draws the cell on its own.
	Group string
	Dir   string // folder holding summary.json and metrics.csv
}

// The files Draw writes, in the order it writes them.
const (
	accuracyEpochFile = "accuracy-epoch.png"
	accuracyTimeFile  = "accuracy-time.png"
	lossFile          = "loss.png"
	throughputFile    = "throughput.png"
	breakdownFile     = "breakdown.png"
	trafficFile       = "traffic.png"
	densityFile       = "density.png"
	imbalanceFile     = "imbalance.png"
)

// Draw draws the experiment's PNG plots into outDir from the cells' files and returns the
// paths written. Cells whose summary.json or metrics.csv is missing (not run yet) are
// skipped; a file that exists but does not parse is an error. If no cell has data, Draw
// returns an error and writes nothing. On a later error it returns the paths written so far.
func Draw(outDir string, cells []Cell) ([]string, error) {
	runs, err := loadRuns(cells)
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("no data to plot: none of the %d cells has both summary.json and metrics.csv", len(cells))
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", outDir, err)
	}
	figures := []struct {
		file  string
		paint painter
	}{
		{accuracyEpochFile, qualityPainter(runs, byEpoch)},
		{accuracyTimeFile, qualityPainter(runs, byWallClock)},
		{lossFile, lossPainter(runs)},
		{throughputFile, throughputPainter(runs)},
		{breakdownFile, breakdownPainter(runs)},
		{trafficFile, trafficPainter(runs)},
		{densityFile, densityPainter(runs)},
	}
	if slices.ContainsFunc(runs, func(r run) bool { return len(curveOf(&r, imbalancePoints).xys) > 0 }) {
		figures = append(figures, struct {
			file  string
			paint painter
		}{imbalanceFile, imbalancePainter(runs)})
	}
	var written []string
	for _, f := range figures {
		path := filepath.Join(outDir, f.file)
		png, err := renderPNG(f.paint)
		if err != nil {
			return written, fmt.Errorf("drawing %s: %w", path, err)
		}
		if err := atomicfile.Write(path, png); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	return written, nil
}

// run is a cell with its data read, and how it looks in the plots.
type run struct {
	Cell
	label   string
	summary trainer.Summary // of a group, the mean of its seeds' (meanSummary)
	metrics []Metric        // nil for a group, whose seeds hold theirs
	look    look
	seeds   []run // the runs a group pools (poolSeeds); nil for a lone cell
}

// look is how a run is drawn: the colour names the pipeline, the dash pattern and point
// shape name the setting.
type look struct {
	color  color.Color
	dashes []vg.Length
	glyph  draw.GlyphDrawer
}

// loadRuns reads the cells that have data, in the order given, pools the seeds of each
// group and assigns their looks.
func loadRuns(cells []Cell) ([]run, error) {
	var runs []run
	for _, c := range cells {
		r, ok, err := loadRun(c)
		if err != nil {
			return nil, err
		}
		if ok {
			runs = append(runs, r)
		}
	}
	runs = poolSeeds(runs)
	assignLooks(runs)
	return runs, nil
}

// loadRun reads one cell; ok is false when a file is missing, which is normal for a cell
// that has not run yet.
func loadRun(c Cell) (r run, ok bool, err error) {
	summaryPath := filepath.Join(c.Dir, "summary.json")
	data, err := os.ReadFile(summaryPath)
	if errors.Is(err, fs.ErrNotExist) {
		return run{}, false, nil
	}
	if err != nil {
		return run{}, false, fmt.Errorf("reading %s: %w", summaryPath, err)
	}
	var s trainer.Summary
	if err := json.Unmarshal(data, &s); err != nil {
		return run{}, false, fmt.Errorf("reading %s: %w", summaryPath, err)
	}
	metrics, err := ReadMetrics(filepath.Join(c.Dir, "metrics.csv"))
	if errors.Is(err, fs.ErrNotExist) {
		return run{}, false, nil
	}
	if err != nil {
		return run{}, false, err
	}
	return run{Cell: c, label: label(c), summary: s, metrics: metrics}, true, nil
}

// label names a cell in legends and on axes: its pipeline, then its setting. A cell without
// a pipeline (a matrix that does not vary it) goes by its setting, or failing that its name.
func label(c Cell) string {
	switch {
	case c.Pipeline == "" && c.Setting == "":
		return c.Name
	case c.Pipeline == "":
		return c.Setting
	case c.Setting == "":
		return c.Pipeline
	}
	return c.Pipeline + " " + c.Setting
}

// assignLooks gives each pipeline a colour and each setting a dash pattern and point shape,
// both in order of first appearance, so that one experiment's plots agree with each other.
func assignLooks(runs []run) {
	pipelines, settings := distinct(runs)
	for i := range runs {
		p, s := indexOf(pipelines, runs[i].Pipeline), indexOf(settings, runs[i].Setting)
		runs[i].look = look{color: pipelineColor(p), dashes: settingDashes(s), glyph: settingGlyph(s)}
	}
}

// distinct returns the runs' pipelines and settings, each once, in order of first appearance.
func distinct(runs []run) (pipelines, settings []string) {
	for _, r := range runs {
		if indexOf(pipelines, r.Pipeline) < 0 {
			pipelines = append(pipelines, r.Pipeline)
		}
		if indexOf(settings, r.Setting) < 0 {
			settings = append(settings, r.Setting)
		}
	}
	return pipelines, settings
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// pipelineColor returns the i-th colour of the Okabe–Ito palette, chosen because its colours
// stay distinct for colour-blind readers and in greyscale print. Yellow comes last of its
// eight: it is hard to see on white. Grey is a ninth, so that a chart of all nine
// pipelines of an experiment (dense, the three of ours and the five baselines) colours each
// differently.
func pipelineColor(i int) color.Color {
	palette := [...]color.RGBA{
		{0x00, 0x72, 0xB2, 0xFF}, // blue
		{0xD5, 0x5E, 0x00, 0xFF}, // vermillion
		{0x00, 0x9E, 0x73, 0xFF}, // bluish green
		{0xCC, 0x79, 0xA7, 0xFF}, // reddish purple
		{0xE6, 0x9F, 0x00, 0xFF}, // orange
		{0x56, 0xB4, 0xE9, 0xFF}, // sky blue
		{0x00, 0x00, 0x00, 0xFF}, // black
		{0xF0, 0xE4, 0x42, 0xFF}, // yellow
		{0x99, 0x99, 0x99, 0xFF}, // grey
	}
	return palette[i%len(palette)]
}

func settingDashes(i int) []vg.Length {
	patterns := [...][]vg.Length{
		nil, // solid
		{vg.Points(6), vg.Points(3)},
		{vg.Points(1.5), vg.Points(2)},
		{vg.Points(6), vg.Points(2), vg.Points(1.5), vg.Points(2)},
	}
	return patterns[i%len(patterns)]
}

func settingGlyph(i int) draw.GlyphDrawer {
	shapes := [...]draw.GlyphDrawer{
		// Filled shapes first: they stay visible on dashed lines.
		draw.CircleGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}, draw.RingGlyph{},
		draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{},
	}
	return shapes[i%len(shapes)]
}
