package experiments

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/trainer"
)

// TestCompareSamples holds the tests to figures computed independently (mpmath's
// regularised incomplete beta for Student's t) for two groups of five seeds.
func TestCompareSamples(t *testing.T) {
	a := newSample([]float64{98.1, 98.3, 97.9, 98.2, 98.0})
	ref := newSample([]float64{98.3, 98.2, 98.4, 98.25, 98.35})
	if math.Abs(a.mean-98.1) > 1e-12 || math.Abs(a.half-0.196324316147753) > 1e-9 {
		t.Errorf("mean %v ± %v, want 98.1 ± 0.196324316147753", a.mean, a.half)
	}
	for _, tc := range []struct {
		margin, pEquiv float64
		verdict        string
	}{
		{0.5, 0.00468236092046115, "equivalent, though lower"},
		{0.2, 0.5, "lower"},
	} {
		d, err := compareSamples(a, ref, tc.margin)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"difference", d.diff, -0.2}, {"half-width", d.half, 0.194387082186846},
			{"Welch p", d.p, 0.0454646189709262}, {"TOST p", d.pEquiv, tc.pEquiv},
		} {
			if math.Abs(c.got-c.want) > 1e-9 {
				t.Errorf("margin %g: %s %v, want %v", tc.margin, c.name, c.got, c.want)
			}
		}
		if got := d.verdict(); got != tc.verdict {
			t.Errorf("margin %g: verdict %q, want %q", tc.margin, got, tc.verdict)
		}
	}
	// Seeds far apart decide nothing at this margin.
	wide := newSample([]float64{95, 99, 97, 98.5, 96})
	d, err := compareSamples(wide, ref, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.verdict(); got != "undecided" {
		t.Errorf("wide seeds: verdict %q (p %v, TOST p %v), want undecided", got, d.p, d.pEquiv)
	}
	// Figures that do not vary between seeds are compared as they are.
	same := newSample([]float64{1, 1, 1})
	if d, err := compareSamples(same, newSample([]float64{2, 2}), 0.5); err != nil || d.verdict() != "lower" {
		t.Errorf("constant samples: %+v, %v, want lower", d, err)
	}
	if _, err := compareSamples(newSample([]float64{1}), ref, 0.5); err == nil {
		t.Error("one seed compared without error")
	}
}

func TestBadCompare(t *testing.T) {
	const matrix = "matrix:\n  pipeline: [dense, ssfusion]\n  seed: [1, 2]\n"
	for _, tc := range []struct{ name, compare, want string }{
		{"no reference", "compare: {margin: 0.5}\n", "reference"},
		{"no margin", "compare: {reference: dense}\n", "margin: state"},
		{"zero margin", "compare: {reference: dense, margin: 0}\n", "positive"},
		{"negative margin", "compare: {reference: dense, margin: -1}\n", "positive"},
		{"unknown key", "compare: {reference: dense, margin: 0.5, alpha: 0.1}\n", `unknown key "alpha"`},
		{"reference on no axis", "compare: {reference: align=true, margin: 1}\n", "align is not an axis"},
		{"reference value not on its axis", "compare: {reference: pipeline=ssfusion-o, margin: 1}\n", "has no value ssfusion-o"},
		{"unknown figure", "compare: {reference: dense, margin: 0.5, figure: speed}\n", "compare accuracy or throughput"},
		{"not a mapping", "compare: dense\n", "want {reference"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.compare + matrix))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "compare") {
				t.Errorf("error %v, want one naming compare and %q", err, tc.want)
			}
		})
	}
	_, err := Parse([]byte("compare: {reference: dense, margin: 0.5}\nmatrix: {pipeline: [dense, ssfusion]}\n"))
	if err == nil || !strings.Contains(err.Error(), "sweep seed") {
		t.Errorf("a comparison without seeds: %v", err)
	}
}

// TestComparisonReport: every group is tested against the dense group of its task, which
// dense shares across densities; the report gives the intervals, the tests and verdicts.
func TestComparisonReport(t *testing.T) {
	dir := t.TempDir()
	acc := map[string][]float64{
		"task-easy_density-0.01_pipeline-dense":     {98.3, 98.2, 98.4, 98.25, 98.35},
		"task-easy_density-0.01_pipeline-pertensor": {98.1, 98.3, 97.9, 98.2, 98.0},
		"task-easy_density-0.05_pipeline-pertensor": {98.3, 98.2, 98.4, 98.25, 98.35},
		"task-hard_density-0.01_pipeline-dense":     {90, 90.5, 91, 90.2, 90.3},
		"task-hard_density-0.01_pipeline-pertensor": {85, 86, 85.5, 85.2, 85.3},
		"task-hard_density-0.05_pipeline-pertensor": {88, 92, 86, 93, 90},
	}
	s, cells := seededExperiment(t, dir, `
name: cmp
compare: {reference: dense, margin: 0.5}
base: {workers: 2}
matrix:
  task:
    - {name: easy, lr: 0.1}
    - {name: hard, lr: 0.05}
  density: [0.01, 0.05]
  pipeline: [dense, pertensor]
  seed: [1, 2, 3, 4, 5]
exclude:
  - {density: 0.05, pipeline: dense}
`, acc, accuracyAndTraffic)
	out := filepath.Join(dir, "cmp")
	if err := WriteReport(s, cells, out); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(raw)
	for _, want := range []string{
		"## Against dense",
		"| task-easy_density-0.01_pipeline-dense | 5 | 98.30 [98.20, 98.40]% | 1.0 KB | the reference | | | |",
		"| task-easy_density-0.01_pipeline-pertensor | 5 | 98.10 [97.90, 98.30]% | 1.0 KB | -0.20 [-0.39, -0.01] | 0.045 | 0.0047 | equivalent, though lower |",
		"| task-easy_density-0.05_pipeline-pertensor | 5 | 98.30 [98.20, 98.40]% | 1.0 KB | +0.00 [-0.12, +0.12] | 1 | <0.001 | equivalent |",
		"| task-hard_density-0.01_pipeline-pertensor | 5 | 85.40 [", "| lower |",
		"| task-hard_density-0.05_pipeline-pertensor | 5 | 89.80 [", "| undecided |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	// The hard task's groups are set against the hard task's dense group, not the easy one's.
	if strings.Count(md, "| equivalent") != 2 {
		t.Errorf("want two equivalent groups (the easy task's):\n%s", md)
	}
	for _, png := range []string{"accuracy-traffic_task-easy.png", "accuracy-traffic_task-hard.png"} {
		if !strings.Contains(md, "]("+png+")") {
			t.Errorf("report does not show %s", png)
		}
		if _, err := os.Stat(filepath.Join(out, png)); err != nil {
			t.Errorf("chart missing: %v", err)
		}
	}
	csv, err := os.ReadFile(filepath.Join(out, "comparison.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"group,reference,seeds,mean,ci_low,ci_high,bytes_sent_per_step,difference,",
		"task-easy_density-0.01_pipeline-pertensor,task-easy_density-0.01_pipeline-dense,5,98.1",
		"0.0454646189",
		`"equivalent, though lower"`,
	} {
		if !strings.Contains(string(csv), want) {
			t.Errorf("comparison.csv lacks %q:\n%s", want, csv)
		}
	}
}

// TestThroughputComparison: throughput is compared in samples per second, with the margin
// in percent of the reference's mean, and draws no accuracy chart.
func TestThroughputComparison(t *testing.T) {
	dir := t.TempDir()
	speeds := map[string][]float64{
		"pipeline-ssfusion-naive": {100, 101, 99},
		"pipeline-ssfusion-o":     {100.5, 99.5, 100},
		"pipeline-ssfusion":       {120, 121, 119},
	}
	s, cells := seededExperiment(t, dir, `
name: speed
compare: {reference: ssfusion-naive, margin: 5, figure: throughput}
base: {workers: 2}
matrix:
  pipeline: [ssfusion-naive, ssfusion-o, ssfusion]
  seed: [1, 2, 3]
`, speeds, speed)
	out := filepath.Join(dir, "speed")
	if err := WriteReport(s, cells, out); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(raw)
	for _, want := range []string{
		"Each group's throughput (samples/s) over its seeds", "within ±5% of the reference's",
		"| pipeline-ssfusion-o | 3 | 100.00 [98.76, 101.24] | - | +0.00 [-2.08, +2.08] |", "| equivalent |",
		"| pipeline-ssfusion | 3 | 120.00 [117.52, 122.48] | - | +20.00 [", "| higher |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "accuracy-traffic") {
		t.Error("a throughput comparison drew an accuracy chart")
	}
}

// TestReferenceByAxis: a reference named KEY=VALUE is the group of that value on each
// setting of the other axes: here every selector's unaligned group against its aligned one.
func TestReferenceByAxis(t *testing.T) {
	speeds := map[string][]float64{
		"selector-dgc_safusion-align-true": {100, 102}, "selector-dgc_safusion-align-false": {80, 82},
		"selector-gaussiank_safusion-align-true": {50, 52}, "selector-gaussiank_safusion-align-false": {50, 52},
	}
	s, cells := seededExperiment(t, t.TempDir(), `
name: align
compare: {reference: safusion-align=true, margin: 5, figure: throughput}
base: {workers: 2, pipeline: safusion}
matrix:
  selector: [dgc, gaussiank]
  safusion-align: [true, false]
  seed: [1, 2]
`, speeds, speed)
	md, err := Report(s, cells)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## Against safusion-align=true",
		"| selector-dgc_safusion-align-true | 2 | 101.00 [", "| the reference |",
		"| selector-dgc_safusion-align-false | 2 | 81.00 [68.29, 93.71] | - | -20.00 [",
		"| selector-gaussiank_safusion-align-false | 2 | 51.00 [", "| +0.00 [",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// seededExperiment expands the experiment in spec into dir and gives every cell a finished
// summary: each seed of a group, in order, the next of the group's values, which set sets
// into the summary (accuracy, samples/s).
func seededExperiment(t *testing.T, dir, spec string, values map[string][]float64, set func(*trainer.Summary, float64)) (*Spec, []Cell) {
	t.Helper()
	s, err := Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	cells, err := s.Expand(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, c := range cells {
		i := seen[c.Group]
		seen[c.Group]++
		acc := 0.9
		sum := trainer.Summary{Config: c.Config, ResultsVersion: trainer.ResultsVersion, Complete: true, Steps: 100, Workers: 2,
			Eval: trainer.Eval{Accuracy: &acc}}
		set(&sum, values[c.Group][i])
		put(t, c, sum)
		writeMetrics(t, c.Config.Out, "eval,100,1,10,,,,,,,,,,,,,0.9,0.3,\n")
	}
	return s, cells
}

// accuracyAndTraffic sets a summary's accuracy from points and its traffic to 1000 bytes.
func accuracyAndTraffic(sum *trainer.Summary, points float64) {
	sum.Eval.Accuracy = ptr(points / 100)
	sum.Traffic.BytesSentPerStep = ptr(1000)
}

// speed sets a summary's samples per second.
func speed(sum *trainer.Summary, v float64) { sum.Throughput.SamplesPerS = v }
