package plots

import (
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"

	"github.com/ssfusion/ssfusion/trainer"
)

const metricsHeader = "kind,step,epoch,wall_s,lr,loss,grad_norm,samples,step_ms,compute_ms,sparsify_ms,comm_ms,wait_ms,bytes_sent,density_achieved,tensors_missing,eval_accuracy,eval_loss,eval_perplexity\n"

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadMetrics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.csv")
	writeFile(t, path, metricsHeader+
		"train,0,0.01,0.5,0.1,2.3,1.5,32,10,6,1,2,1,4096,0.01,3,,,\n"+
		"train,1,0.02,1.0,0.1,NaN,1.4,32,10,6,1,2,1,4096,,,,,\n"+
		"eval,2,0.02,1.25,,,,1000,,,,,,,,,0.875,0.4,\n"+
		"train,3,0.03,1.5,0.1") // a line a running training is still writing: left out
	got, err := ReadMetrics(path)
	if err != nil {
		t.Fatal(err)
	}
	nan := math.NaN()
	want := []Metric{
		{Kind: "train", Step: 0, Epoch: 0.01, WallS: 0.5, Loss: 2.3, EvalAccuracy: nan, EvalLoss: nan, EvalPerplexity: nan},
		{Kind: "train", Step: 1, Epoch: 0.02, WallS: 1.0, Loss: nan, EvalAccuracy: nan, EvalLoss: nan, EvalPerplexity: nan},
		{Kind: "eval", Step: 2, Epoch: 0.02, WallS: 1.25, Loss: nan, EvalAccuracy: 0.875, EvalLoss: 0.4, EvalPerplexity: nan},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !sameMetric(got[i], want[i]) {
			t.Errorf("row %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

// sameMetric compares metrics field by field, NaN equal to NaN.
func sameMetric(a, b Metric) bool {
	same := func(x, y float64) bool { return x == y || math.IsNaN(x) && math.IsNaN(y) }
	return a.Kind == b.Kind && a.Step == b.Step && same(a.Epoch, b.Epoch) && same(a.WallS, b.WallS) &&
		same(a.Loss, b.Loss) && same(a.EvalAccuracy, b.EvalAccuracy) && same(a.EvalLoss, b.EvalLoss) &&
		same(a.EvalPerplexity, b.EvalPerplexity)
}

func TestReadMetricsColumnsByName(t *testing.T) {
	// Reordered columns, an added one and missing optional ones must still read.
	path := filepath.Join(t.TempDir(), "metrics.csv")
	writeFile(t, path, "loss,extra,step,kind\n1.5,x,7,train\n")
	got, err := ReadMetrics(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Kind != "train" || got[0].Step != 7 || got[0].Loss != 1.5 || !math.IsNaN(got[0].Epoch) {
		t.Errorf("got %+v, want one train row at step 7 with loss 1.5 and no epoch", got)
	}
}

func TestReadMetricsErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string // in the error, besides the file name
	}{
		{"too few fields", metricsHeader + "train,0,0.1\n", "line 2"},
		{"too many fields on a later line", metricsHeader +
			"train,0,0.01,0.5,0.1,2.3,1.5,32,10,6,1,2,1,4096,,,,,\n" +
			"train,1,0.01,0.5,0.1,2.3,1.5,32,10,6,1,2,1,4096,,,,,,extra\n", "line 3"},
		{"loss not a number", metricsHeader +
			"train,0,0.01,0.5,0.1,2.3,1.5,32,10,6,1,2,1,4096,,,,,\n" +
			"train,1,0.01,0.5,0.1,low,1.5,32,10,6,1,2,1,4096,,,,,\n", `line 3: column loss: "low" is not a number`},
		{"step not an integer", metricsHeader + "train,1.5,0.01,0.5,0.1,2.3,1.5,32,10,6,1,2,1,4096,,,,,\n", `line 2: column step`},
		{"empty step", metricsHeader + "eval,,0.01,0.5,,,,,,,,,,,,,0.5,,\n", "line 2"},
		{"bare quote", metricsHeader + "train,0,0\"1,0.5,0.1,2.3,1.5,32,10,6,1,2,1,4096,,,,,\n", "line 2"},
		{"no kind column", "step,loss\n1,2\n", "line 1"},
		{"empty file", "", "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "metrics.csv")
			writeFile(t, path, tt.content)
			_, err := ReadMetrics(path)
			if err == nil {
				t.Fatal("got no error")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name the file and %q", err, tt.want)
			}
		})
	}
}

func TestReadMetricsMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.csv")
	if _, err := ReadMetrics(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("got %v, want an error naming %s", err, path)
	}
}

// fixture describes a cell's run for writeCell.
type fixture struct {
	cell       Cell
	samplesPS  float64
	bytes      float64
	missing    *float64 // tensors missing per step; nil for dense
	perplexity bool     // a language model
	lag        float64  // how much worse than the best run it learns, 0 to 0.2
}

// fixtureDensity is the density the fixtures aim at.
var fixtureDensity = 0.01

// writeCell writes a plausible summary.json and metrics.csv for f into f.cell.Dir.
func writeCell(t *testing.T, f fixture) {
	t.Helper()
	final := 0.3
	initial := 2.3
	s := trainer.Summary{
		Pipeline: f.cell.Pipeline, Steps: 100, Epochs: 2, WallSeconds: 100 / f.samplesPS * 32,
		InitialLoss: &initial, FinalLoss: &final,
		Throughput: trainer.Throughput{SamplesPerS: f.samplesPS, StepMS: stepMS(32000 / f.samplesPS)},
		Traffic:    trainer.Traffic{BytesSentPerStep: &f.bytes},
		Sparsity:   trainer.Sparsity{Tensors: 8, TensorsMissingPerStep: f.missing, DensityTarget: &fixtureDensity},
		Complete:   true,
	}
	js, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(f.cell.Dir, "summary.json"), string(js))

	var b strings.Builder
	b.WriteString(metricsHeader)
	stepS := 32 / f.samplesPS
	for step := range 100 {
		loss := 2.3*math.Exp(-float64(step)/30)*(1+f.lag) + 0.1*math.Sin(float64(step))
		// Every fixture reports a density, dense included, so that each plot shows
		// both pipelines' colours; it starts high and settles on the target.
		density := fixtureDensity * (1 + 3*math.Exp(-float64(step)/10)) * (1 + f.lag)
		fmt.Fprintf(&b, "train,%d,%g,%g,0.1,%g,1,32,10,6,1,2,1,%g,%g,,,,\n",
			step, float64(step+1)/50, float64(step+1)*stepS, loss, f.bytes, density)
		if (step+1)%20 == 0 {
			acc := 0.5 + (0.4-f.lag)*float64(step+1)/100
			ppl := ""
			if f.perplexity {
				ppl = fmt.Sprint(5000 * math.Exp(-float64(step+1)/20) * (1 + f.lag))
			}
			fmt.Fprintf(&b, "eval,%d,%g,%g,,,,1000,,,,,,,,,%g,%g,%s\n",
				step+1, float64(step+1)/50, float64(step+1)*stepS, acc, 1-acc, ppl)
		}
	}
	writeFile(t, filepath.Join(f.cell.Dir, "metrics.csv"), b.String())
}

// stepMS splits a step of total milliseconds as a sparsifying pipeline might: selection and
// communication overlap compute, so the parts add up to more than the total.
func stepMS(total float64) trainer.StepMS {
	return trainer.StepMS{Total: total, Compute: 0.6 * total, Sparsify: 0.1 * total, Comm: 0.5 * total, Wait: 0.2 * total}
}

// fixtureCells writes two pipelines by two settings, plus a cell that has not run.
func fixtureCells(t *testing.T, perplexity bool) []Cell {
	root := t.TempDir()
	missing := 1.5
	var cells []Cell
	for _, setting := range []string{"bandwidth-10Mbit", "bandwidth-1Gbit"} {
		for _, pipeline := range []string{"dense", "ssfusion"} {
			c := Cell{Name: "pipeline-" + pipeline + "_" + setting, Pipeline: pipeline, Setting: setting}
			c.Dir = filepath.Join(root, c.Name)
			f := fixture{cell: c, samplesPS: 800, bytes: 4e6, perplexity: perplexity}
			if pipeline == "ssfusion" {
				f.samplesPS, f.bytes, f.missing, f.lag = 2400, 8e4, &missing, 0.05
			}
			if setting == "bandwidth-1Gbit" {
				f.samplesPS *= 2
			}
			writeCell(t, f)
			cells = append(cells, c)
		}
	}
	notRun := Cell{Name: "pipeline-pertensor", Pipeline: "pertensor", Setting: "bandwidth-1Gbit", Dir: filepath.Join(root, "pipeline-pertensor")}
	return append(cells, notRun)
}

var wantFiles = []string{accuracyEpochFile, accuracyTimeFile, lossFile, throughputFile, breakdownFile, trafficFile, densityFile}

func TestDraw(t *testing.T) {
	for _, perplexity := range []bool{false, true} {
		t.Run(fmt.Sprintf("perplexity=%v", perplexity), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "plots")
			paths, err := Draw(out, fixtureCells(t, perplexity))
			if err != nil {
				t.Fatal(err)
			}
			if len(paths) != len(wantFiles) {
				t.Fatalf("got %d paths %v, want %d", len(paths), paths, len(wantFiles))
			}
			for i, name := range wantFiles {
				if paths[i] != filepath.Join(out, name) {
					t.Errorf("path %d is %s, want %s", i, paths[i], filepath.Join(out, name))
				}
				checkPNG(t, paths[i])
			}
			entries, err := os.ReadDir(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != len(wantFiles) {
				t.Errorf("%s holds %d files, want only the %d plots (no temporary files left)", out, len(entries), len(wantFiles))
			}
		})
	}
}

// openFigure decodes the PNG at path and checks that it has the figure's size.
func openFigure(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	wantW, wantH := int(figureWidth.Dots(figureDPI)+0.5), int(figureHeight.Dots(figureDPI)+0.5)
	if abs(w-wantW) > 1 || abs(h-wantH) > 1 {
		t.Errorf("%s is %dx%d pixels, want %dx%d", filepath.Base(path), w, h, wantW, wantH)
	}
	return img
}

// checkPNG checks that path is a landscape PNG of the figure's size with enough drawn on it.
func checkPNG(t *testing.T, path string) {
	t.Helper()
	img := openFigure(t, path)
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	inked, colors := ink(img)
	if inked < w*h/100 {
		t.Errorf("%s: only %d of %d pixels are not white", filepath.Base(path), inked, w*h)
	}
	if colors < 3 {
		t.Errorf("%s: only %d distinct colours", filepath.Base(path), colors)
	}
	// The pipelines' colours must show; lines and bars are thick enough to hold exact pixels.
	for i := range 2 {
		if !hasColor(img, pipelineColor(i)) && filepath.Base(path) != breakdownFile {
			t.Errorf("%s lacks pipeline colour %d %v", filepath.Base(path), i, pipelineColor(i))
		}
	}
}

func ink(img image.Image) (inked, colors int) {
	seen := map[color.RGBA]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			seen[c] = true
			if c != (color.RGBA{0xFF, 0xFF, 0xFF, 0xFF}) {
				inked++
			}
		}
	}
	return inked, len(seen)
}

func hasColor(img image.Image, want color.Color) bool {
	w := color.RGBAModel.Convert(want).(color.RGBA)
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)).(color.RGBA) == w {
				return true
			}
		}
	}
	return false
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func TestDrawSingleSetting(t *testing.T) {
	// A matrix over pipelines only: Setting is "" everywhere and the bars form one group.
	root := t.TempDir()
	var cells []Cell
	for _, pipeline := range []string{"dense", "pertensor", "multitensor"} {
		c := Cell{Name: "pipeline-" + pipeline, Pipeline: pipeline, Dir: filepath.Join(root, pipeline)}
		writeCell(t, fixture{cell: c, samplesPS: 1000, bytes: 1e5})
		cells = append(cells, c)
	}
	paths, err := Draw(filepath.Join(root, "plots"), cells)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		checkPNG(t, p)
	}
}

func TestDrawNoData(t *testing.T) {
	root := t.TempDir()
	tests := []struct {
		name  string
		cells []Cell
	}{
		{"no cells", nil},
		{"no files", []Cell{{Name: "a", Pipeline: "dense", Dir: filepath.Join(root, "a")}}},
		{"summary without metrics", []Cell{{Name: "b", Pipeline: "dense", Dir: filepath.Join(root, "b")}}},
	}
	writeFile(t, filepath.Join(root, "b", "summary.json"), "{}")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(root, "plots-"+tt.name)
			paths, err := Draw(out, tt.cells)
			if err == nil || !strings.Contains(err.Error(), "no data") {
				t.Errorf("got paths %v and error %v, want a no-data error", paths, err)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("Draw created %s without data", out)
			}
		})
	}
}

func TestDrawCorruptFiles(t *testing.T) {
	tests := []struct {
		name, file, content, want string
	}{
		{"summary not JSON", "summary.json", "{not json", "summary.json"},
		{"metrics malformed", "metrics.csv", metricsHeader + "train,x\n", "metrics.csv: record on line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cells := fixtureCells(t, false)
			writeFile(t, filepath.Join(cells[1].Dir, tt.file), tt.content)
			_, err := Draw(filepath.Join(t.TempDir(), "plots"), cells)
			if err == nil || !strings.Contains(err.Error(), filepath.Join(cells[1].Dir, tt.want)) {
				t.Errorf("got %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

func TestMovingAverage(t *testing.T) {
	xys := movingAverage(plotter.XYs{{X: 0, Y: 1}, {X: 1, Y: 3}, {X: 2, Y: 5}, {X: 3, Y: 7}}, 2)
	want := []float64{1, 2, 4, 6}
	for i, w := range want {
		if xys[i].Y != w || xys[i].X != float64(i) {
			t.Errorf("point %d: got %v, want (%d, %g)", i, xys[i], i, w)
		}
	}
}

func TestLabel(t *testing.T) {
	tests := []struct {
		cell Cell
		want string
	}{
		{Cell{Name: "pipeline-dense", Pipeline: "dense"}, "dense"},
		{Cell{Name: "x", Pipeline: "ssfusion", Setting: "bandwidth-10Mbit"}, "ssfusion bandwidth-10Mbit"},
		{Cell{Name: "workers-2", Setting: "workers-2"}, "workers-2"},
		{Cell{Name: "run"}, "run"},
	}
	for _, tt := range tests {
		if got := label(tt.cell); got != tt.want {
			t.Errorf("label(%+v) = %q, want %q", tt.cell, got, tt.want)
		}
	}
}

func TestDrawDegenerate(t *testing.T) {
	// Runs that stopped before any step or evaluation, or diverged, still get plots
	// (saying there is no data yet) rather than an error or a panic.
	root := t.TempDir()
	empty := Cell{Name: "empty", Pipeline: "dense", Dir: filepath.Join(root, "empty")}
	js, err := json.Marshal(trainer.Summary{Pipeline: "dense"})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(empty.Dir, "summary.json"), string(js))
	writeFile(t, filepath.Join(empty.Dir, "metrics.csv"), metricsHeader)

	diverged := Cell{Name: "diverged", Pipeline: "ssfusion", Dir: filepath.Join(root, "diverged")}
	writeFile(t, filepath.Join(diverged.Dir, "summary.json"), string(js))
	writeFile(t, filepath.Join(diverged.Dir, "metrics.csv"), metricsHeader+
		"train,0,0.01,0.5,0.1,NaN,1.5,32,10,6,1,2,1,4096,,,,,\n"+
		"train,1,0.02,1.0,0.1,+Inf,1.5,32,10,6,1,2,1,4096,,,,,\n"+
		"eval,2,0.02,1.25,,,,1000,,,,,,,,,NaN,,\n")

	paths, err := Draw(filepath.Join(root, "plots"), []Cell{empty, diverged})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != len(wantFiles) {
		t.Fatalf("got %d paths, want %d", len(paths), len(wantFiles))
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = png.Decode(f)
		f.Close()
		if err != nil {
			t.Errorf("decoding %s: %v", p, err)
		}
	}
}

func TestFormatValue(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{0, "0"}, {2, "2"}, {1.5, "1.5"}, {13.333, "13.3"}, {6.6667, "6.67"}, {333.33, "333"},
		{4000, "4000"}, {123456.7, "123457"}, {0.012345, "0.0123"},
	}
	for _, tt := range tests {
		if got := formatValue(tt.v); got != tt.want {
			t.Errorf("formatValue(%g) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

// TestDensityPlotShowsTarget: the density plot draws the target as a grey line beside the
// cells' densities, and none when the summaries name no target.
func TestDensityPlotShowsTarget(t *testing.T) {
	for _, target := range []bool{true, false} {
		out := filepath.Join(t.TempDir(), "plots")
		cells := fixtureCells(t, false)
		if !target {
			for _, c := range cells {
				path := filepath.Join(c.Dir, "summary.json")
				raw, err := os.ReadFile(path)
				if err != nil {
					continue // the cell that has not run
				}
				writeFile(t, path, strings.Replace(string(raw), `"density_target":0.01`, `"density_target":null`, 1))
			}
		}
		if _, err := Draw(out, cells); err != nil {
			t.Fatal(err)
		}
		if got := hasColor(openFigure(t, filepath.Join(out, densityFile)), targetColor); got != target {
			t.Errorf("target named %v: the target's grey line drawn %v", target, got)
		}
	}
}

// TestImbalancePlotOnlyWhenReported: the imbalance figure is drawn when a cell's metrics
// carry partition imbalance, with the line of perfect balance, and not otherwise.
func TestImbalancePlotOnlyWhenReported(t *testing.T) {
	cells := fixtureCells(t, false)
	out := filepath.Join(t.TempDir(), "plots")
	if _, err := Draw(out, cells); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, imbalanceFile)); err == nil {
		t.Error("an imbalance figure was drawn though no cell reports imbalance")
	}
	var b strings.Builder
	b.WriteString("kind,step,loss,density_achieved,partition_imbalance\n")
	for step := range 50 {
		fmt.Fprintf(&b, "train,%d,1,0.01,%g\n", step, 1+1/float64(step+1))
	}
	writeFile(t, filepath.Join(cells[1].Dir, "metrics.csv"), b.String())
	if _, err := Draw(out, cells); err != nil {
		t.Fatal(err)
	}
	img := openFigure(t, filepath.Join(out, imbalanceFile))
	if !hasColor(img, targetColor) {
		t.Error("the imbalance figure lacks the line of perfect balance")
	}
}
