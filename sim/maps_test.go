package sim

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// tinyMapConfig is the simulate command's settings for a map of the tiny profile, with
// fusion buffers of 16 KiB and a latency given, as a map needs.
func tinyMapConfig(t *testing.T, names ...string) Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.json")
	if err := tinyProfile().Save(path); err != nil {
		t.Fatal(err)
	}
	c := testConfig()
	c.Profiles = []string{path}
	c.Settings.FusionMB = 1.0 / 64
	c.Workers = []int{4}
	c.Networks.Bandwidths = []string{"1Gbit"}
	c.Networks.Latency = 20 * time.Microsecond
	c.Parallel = 2
	named(&c, names...)
	return c
}

func mustAxis(t *testing.T, s string) Axis {
	t.Helper()
	a, err := ParseAxis(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestMapPointsEqualSingleRuns: every point of a map predicts what one simulate run at
// that point's constants predicts, flag for flag: workers and bandwidth as --workers and
// --bandwidth, a top-k line halved in both terms as --selection-speed 2.
func TestMapPointsEqualSingleRuns(t *testing.T) {
	c := tinyMapConfig(t, "dense", "pertensor", "ssfusion")
	m, err := c.Map(mustAxis(t, "workers=2,8"), mustAxis(t, "bandwidth=1Gbit,25Gbit"), nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Revision = "r1"
	points, err := m.Run(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 4 {
		t.Fatalf("%d points, want 4", len(points))
	}
	for _, p := range points {
		if p.Revision != "r1" {
			t.Errorf("point %v records revision %q, want the map's r1", p.Constants, p.Revision)
		}
		one := c
		one.Workers = []int{p.Constants.Workers}
		one.Networks.Bandwidths = []string{FormatBandwidth(p.Constants.BitsPerSecond)}
		want := runConfig(t, one)
		if !reflect.DeepEqual(p.Pipelines, want) {
			t.Errorf("map point %d workers, %s: %+v\nsingle run: %+v", p.Constants.Workers, FormatBandwidth(p.Constants.BitsPerSecond), p.Pipelines, want)
		}
	}

	top := DefaultSelectionModel().Kinds["topk"]
	half := mustAxis(t, "select-call="+formatNS(top.PerCallNS/2)+","+formatNS(top.PerCallNS))
	half.Values[0] = top.PerCallNS / 2 // exactly, not as written
	m, err = c.Map(half, Axis{Name: "select-element", Values: []float64{top.PerElementNS / 2, top.PerElementNS}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	points, err = m.Run(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	faster := c
	faster.SelectionSpeed = 2
	want := runConfig(t, faster)
	if got := points[0].Pipelines; !reflect.DeepEqual(got, want) {
		t.Errorf("top-k line halved: %+v\n--selection-speed 2: %+v", got, want)
	}
}

// runConfig simulates c as the simulate command does without a map.
func runConfig(t *testing.T, c Config) []Point {
	t.Helper()
	s, err := c.Sweep()
	if err != nil {
		t.Fatal(err)
	}
	points, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return points
}

// TestZeroContourMovesWithSelectionCost: the dearer a selection call, the better SSFusion,
// which selects fewer tensors and off the backward path, does against per-tensor, which
// selects every tensor in backward. So at every bandwidth its gain grows with the cost
// per call, and the zero contour moves toward cheaper calls: where SSFusion wins at one
// cost, it wins at every dearer one.
func TestZeroContourMovesWithSelectionCost(t *testing.T) {
	c := tinyMapConfig(t, "pertensor", "ssfusion")
	m, err := c.Map(mustAxis(t, "select-call=1us..1ms/4"), mustAxis(t, "bandwidth=100Mbit..100Gbit/4"), nil)
	if err != nil {
		t.Fatal(err)
	}
	points, err := m.Run(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	report := &MapReport{X: m.X, Y: m.Y, Points: points}
	gains, err := report.gains()
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(gains); i++ {
		prev, g := gains[i-1], gains[i]
		if g.Y != prev.Y { // a new row of the grid
			continue
		}
		if g.OverBest < prev.OverBest-1e-9 {
			t.Errorf("at %s: gain %+.3f at %s per call, %+.3f at the cheaper %s", FormatBandwidth(g.Y),
				g.OverBest, formatNS(g.X), prev.OverBest, formatNS(prev.X))
		}
		if prev.OverBest > 0 && g.OverBest <= 0 {
			t.Errorf("at %s: SSFusion wins at %s per call but not at %s", FormatBandwidth(g.Y), formatNS(prev.X), formatNS(g.X))
		}
	}
	// The property means something only if the contour crosses the map: in every row,
	// SSFusion loses at the cheapest call and wins at the dearest.
	for i := 0; i < len(gains); i += len(m.X.Values) {
		first, last := gains[i], gains[i+len(m.X.Values)-1]
		if first.OverBest >= 0 || last.OverBest <= 0 {
			t.Errorf("at %s: gain %+.3f at %s per call and %+.3f at %s; the map does not cross zero there",
				FormatBandwidth(first.Y), first.OverBest, formatNS(first.X), last.OverBest, formatNS(last.X))
		}
	}
}

// TestMapGoesOnFromSavedPoints: a map given the points of an interrupted run simulates
// only the rest, and the saved file holds every point so far after each one.
func TestMapGoesOnFromSavedPoints(t *testing.T) {
	c := tinyMapConfig(t, "pertensor", "ssfusion")
	m, err := c.Map(mustAxis(t, "bandwidth=1Gbit,10Gbit,100Gbit"), Axis{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var saves []int
	all, err := m.Run(context.Background(), nil, func(so []MapPoint) error { saves = append(saves, len(so)); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(saves, []int{1, 2, 3}) {
		t.Errorf("saved %v points, want 1, 2, 3", saves)
	}
	if got := m.Missing(all[:2]); got != 1 {
		t.Errorf("%d points missing from 2 of 3, want 1", got)
	}
	simulated := 0
	m.Progress = func(done, total int, _ string) {
		simulated++
		if done != simulated || total != 1 {
			t.Errorf("progress %d of %d, want %d of the 1 point missing", done, total, simulated)
		}
	}
	again, err := m.Run(context.Background(), all[:2], nil)
	if err != nil {
		t.Fatal(err)
	}
	// The point simulated again took its own time; everything else must match.
	again[2].Seconds, all[2].Seconds = 0, 0
	if simulated != 1 || !reflect.DeepEqual(again, all) {
		t.Errorf("going on from 2 points simulated %d and gave %+v, want 1 and %+v", simulated, again, all)
	}
}

// TestMapRefusesMistakes: a map that cannot run fails before any point, naming why.
func TestMapRefusesMistakes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		x, y  string
		names []string
		want  string
	}{
		{"no ssfusion", nil, "bandwidth=1Gbit,2Gbit", "", []string{"dense", "pertensor"}, "must name it"},
		{"two worker counts", func(c *Config) { c.Workers = []int{2, 4} }, "bandwidth=1Gbit,2Gbit", "", nil, "--workers"},
		{"same axis twice", nil, "bandwidth=1Gbit,2Gbit", "bandwidth=3Gbit,4Gbit", nil, "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names := tc.names
			if names == nil {
				names = []string{"pertensor", "ssfusion"}
			}
			c := tinyMapConfig(t, names...)
			if tc.edit != nil {
				tc.edit(&c)
			}
			var y Axis
			if tc.y != "" {
				y = mustAxis(t, tc.y)
			}
			_, err := c.Map(mustAxis(t, tc.x), y, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestParseAxis(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []float64
		err  string
	}{
		{in: "bandwidth=1Gbit..100Gbit/3", want: []float64{1e9, 1e10, 1e11}},
		{in: "latency=1us,1ms,10us", want: []float64{1e3, 1e4, 1e6}},
		{in: "workers=8..256/6", want: []float64{8, 16, 32, 64, 128, 256}},
		{in: "select-element=0.05ns,1.4", want: []float64{0.05, 1.4}},
		{in: "select-call=1us..200us/2", want: []float64{1e3, 2e5}},
		{in: "speed=1,2", err: "NAME one of"},
		{in: "bandwidth", err: "NAME one of"},
		{in: "bandwidth=1Gbit", err: "at least two"},
		{in: "bandwidth=10Gbit..1Gbit/3", err: "must rise"},
		{in: "bandwidth=1Gbit..10Gbit", err: "/N"},
		{in: "latency=0s,1ms", err: "positive duration"},
		{in: "workers=0,4", err: "not a worker count"},
		{in: "select-element=-1,2", err: "positive time"},
	} {
		a, err := ParseAxis(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one saying %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if len(a.Values) != len(tc.want) {
			t.Errorf("%s: %v, want %v", tc.in, a.Values, tc.want)
			continue
		}
		for i := range a.Values {
			if d := a.Values[i] - tc.want[i]; d > 1e-6*tc.want[i] || d < -1e-6*tc.want[i] {
				t.Errorf("%s: %v, want %v", tc.in, a.Values, tc.want)
				break
			}
		}
	}
}

// TestWithTopKScalesEveryKind: moving top-k's line moves every kind's by the same
// factors, and leaves the model it came from alone.
func TestWithTopKScalesEveryKind(t *testing.T) {
	base := GPUSelectionModel()
	top := base.Kinds["topk"]
	m := base.WithTopK(2*top.PerCallNS, 3*top.PerElementNS)
	for k, l := range base.Kinds {
		if got := m.Kinds[k]; !near(got.PerCallNS, 2*l.PerCallNS) || !near(got.PerElementNS, 3*l.PerElementNS) {
			t.Errorf("%s: %+v, want per call x2 and per element x3 of %+v", k, got, l)
		}
	}
	for k, s := range base.Steps {
		if got := m.Steps[k]; got.From != s.From || !near(got.ExtraNS, 2*s.ExtraNS) {
			t.Errorf("step %s: %+v, want %+v with twice the cost", k, got, s)
		}
	}
	if base.Kinds["topk"] != top {
		t.Error("WithTopK changed the model it came from")
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Abs(b) }

// TestMapSummarySaysWhereEachVerdictHolds: the words under a map name the axis ranges of
// its wins, ties within the model error and losses, and count the fastest pipelines.
func TestMapSummarySaysWhereEachVerdictHolds(t *testing.T) {
	point := func(x, ssfusion, pertensor float64) MapPoint {
		return MapPoint{Model: "m", X: x, Pipelines: []Point{
			{Pipeline: "ssfusion", Result: Result{IterationMS: ssfusion}},
			{Pipeline: "pertensor", Result: Result{IterationMS: pertensor}},
		}}
	}
	r := &MapReport{X: mustAxis(t, "bandwidth=1Gbit,10Gbit,100Gbit,400Gbit"), ModelError: 0.1, Points: []MapPoint{
		point(1e9, 100, 150),  // +50%: wins
		point(1e10, 100, 130), // +30%: wins
		point(1e11, 100, 105), // +5%: within
		point(4e11, 100, 50),  // -50%: loses
		{Model: "m", Setting: "named", X: 1e9, Pipelines: []Point{{Pipeline: "ssfusion", Result: Result{IterationMS: 1}}, {Pipeline: "pertensor", Result: Result{IterationMS: 1}}}},
	}}
	gains, err := r.gains()
	if err != nil {
		t.Fatal(err)
	}
	got := r.Summary("m", gains)
	want := "Of 4 points, SSFusion wins at 2 (bandwidth 1Gbit-10Gbit); within model error at 1 (bandwidth 100Gbit); loses at 1 (bandwidth 400Gbit). Fastest of all: ssfusion at 3, pertensor at 1."
	if got != want {
		t.Errorf("summary\n%s\nwant\n%s", got, want)
	}
}

// TestMapStopsWhenCancelled: cancelling a map stops it at the next point with the
// context's error, and what was saved before stays saved.
func TestMapStopsWhenCancelled(t *testing.T) {
	c := tinyMapConfig(t, "pertensor", "ssfusion")
	m, err := c.Map(mustAxis(t, "bandwidth=1Gbit,10Gbit,100Gbit"), Axis{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var saved [][]MapPoint
	_, err = m.Run(ctx, nil, func(so []MapPoint) error { saved = append(saved, so); cancel(); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want the context's", err)
	}
	if len(saved) != 1 || len(saved[0]) != 1 {
		t.Errorf("saved %d times, want once, with the first point", len(saved))
	}
}

// TestGainAgainstComparesOnlyItsPipelines: a gain against named pipelines ignores the
// faster ones it does not name; with none named it takes every one but dense.
func TestGainAgainstComparesOnlyItsPipelines(t *testing.T) {
	p := MapPoint{Model: "m", Pipelines: []Point{
		{Pipeline: "dense", Result: Result{IterationMS: 300}},
		{Pipeline: "ssfusion", Result: Result{IterationMS: 100}},
		{Pipeline: "pertensor", Result: Result{IterationMS: 150}},
		{Pipeline: "oktopk", Result: Result{IterationMS: 80}},
	}}
	for _, tc := range []struct {
		against []string
		best    string
		gain    float64
	}{
		{nil, "oktopk", -0.2},
		{[]string{"pertensor"}, "pertensor", 0.5},
		{[]string{"pertensor", "dense"}, "pertensor", 0.5},
	} {
		g, err := p.GainAgainst(tc.against)
		if err != nil {
			t.Fatal(err)
		}
		if g.Best != tc.best || !near(g.OverBest, tc.gain) || !near(g.OverDense, 2) || g.Fastest != "oktopk" {
			t.Errorf("against %v: %+v, want %s at %+.2f, +2 over dense, oktopk fastest", tc.against, g, tc.best, tc.gain)
		}
	}
	if _, err := p.GainAgainst([]string{"cupcake"}); err == nil {
		t.Error("a gain against a pipeline the point lacks was given")
	}
	for _, bad := range []string{"x", "=pertensor", "x=", "x=ssfusion,pertensor"} {
		if _, err := ParseComparison(bad); err == nil {
			t.Errorf("ParseComparison(%q) took it", bad)
		}
	}
}

// TestMapReportWritesItsFiles: a map's folder gets its data, its figures and a report
// that says where SSFusion wins, per comparison, with the named settings' gains and
// selection times.
func TestMapReportWritesItsFiles(t *testing.T) {
	c := tinyMapConfig(t, "dense", "pertensor", "multitensor", "ssfusion")
	m, err := c.Map(mustAxis(t, "select-call=1us,1ms"), mustAxis(t, "bandwidth=100Mbit,10Gbit"), NamedSettings()[:1])
	if err != nil {
		t.Fatal(err)
	}
	points, err := m.Run(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := &MapReport{Command: "go run . simulate --vary ...", X: m.X, Y: m.Y, ModelError: 0.05, Points: points,
		Comparisons: []Comparison{{Name: "per-tensor", Against: []string{"pertensor"}}}}
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{MapFile, "points.csv", "gains.csv", "comparisons.csv", "report.md", "tiny-gain.png", "tiny-fastest.png", "tiny-gain-per-tensor.png"} {
		if info, err := os.Stat(filepath.Join(dir, f)); err != nil || info.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Of 4 points, SSFusion ", "Against per-tensor (the faster of pertensor): Of 4 points",
		"At the named settings: A ", "| A | SSFusion testbed", "Selection a step at the named settings", "Cost: 5 points"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	back, err := LoadMapReport(dir)
	if err != nil || back == nil || len(back.Points) != len(points) {
		t.Fatalf("reading the map back: %v", err)
	}
	if err := back.Continues(r.Setting, r.X, r.Y); err != nil {
		t.Errorf("the map read back does not continue itself: %v", err)
	}
	if err := back.Continues(r.Setting, r.Y, r.X); err == nil {
		t.Error("a map with its axes swapped would go on from it")
	}
}
