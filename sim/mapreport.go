package sim

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ssfusion/ssfusion/internal/atomicfile"
	"github.com/ssfusion/ssfusion/plots"
)

// MapFile is the file a map keeps its points in, inside its folder; a map run again into
// the same folder with the same setting goes on from the points it finds there.
const MapFile = "map.json"

// MapReport is what a map writes: its setting, axes and points, and the model error
// inside which a gain is no verdict.
type MapReport struct {
	// Command is the command line that made the map, for its report.
	Command string            `json:"command"`
	Setting map[string]string `json:"setting"`
	X       Axis              `json:"x"`
	Y       Axis              `json:"y"`
	// ModelError is the simulator's error (a fraction) inside which a gain is reported as
	// "within model error", never as a win or a loss.
	ModelError float64 `json:"model_error"`
	// Comparisons are further sets of pipelines to measure SSFusion against, each with a
	// summary, a figure and rows of comparisons.csv; the report's own is the fastest of
	// all others.
	Comparisons []Comparison `json:"comparisons,omitempty"`
	Points      []MapPoint   `json:"points"`
}

// A Comparison is a named set of pipelines that SSFusion's gain is measured against, such
// as the baselines a paper's claim names.
type Comparison struct {
	Name    string   `json:"name"`
	Against []string `json:"against"`
}

// ParseComparison reads a comparison as --compare gives it: NAME=PIPELINE,PIPELINE.
func ParseComparison(s string) (Comparison, error) {
	name, list, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(name) == "" || strings.TrimSpace(list) == "" {
		return Comparison{}, fmt.Errorf("%q: want NAME=PIPELINE,PIPELINE,...", s)
	}
	c := Comparison{Name: strings.TrimSpace(name)}
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p == mapSubject {
			return Comparison{}, fmt.Errorf("%q: SSFusion is what the others are compared with", s)
		}
		c.Against = append(c.Against, p)
	}
	return c, nil
}

// LoadMapReport reads dir's map file; it returns nil and no error when there is none.
func LoadMapReport(dir string) (*MapReport, error) {
	path := filepath.Join(dir, MapFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var r MapReport
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return &r, nil
}

// Continues reports why r, found in a map's folder, cannot be continued by a map of
// setting and axes; nil when it can.
func (r *MapReport) Continues(setting map[string]string, x, y Axis) error {
	if !maps.Equal(r.Setting, setting) || !slices.Equal(r.X.Values, x.Values) || !slices.Equal(r.Y.Values, y.Values) ||
		r.X.Name != x.Name || r.Y.Name != y.Name {
		return errors.New("it holds a map of another setting or other axes")
	}
	return nil
}

// Save writes r's map file alone, as a map does after each point.
func (r *MapReport) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the map: %w", err)
	}
	return atomicfile.Write(filepath.Join(dir, MapFile), append(js, '\n'))
}

// Write writes the map file, points.csv, gains.csv, report.md and per model a gain map
// and a map of the fastest pipeline (a gain plot for a map of one constant).
func (r *MapReport) Write(dir string) error {
	if err := r.Save(dir); err != nil {
		return err
	}
	gains, err := r.gains()
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, "points.csv"), []byte(r.pointsCSV())); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, "gains.csv"), []byte(r.gainsCSV(gains))); err != nil {
		return err
	}
	compared := make([][]Gain, len(r.Comparisons))
	for i, c := range r.Comparisons {
		if compared[i], err = r.gainsAgainst(c.Against); err != nil {
			return fmt.Errorf("comparison %s: %w", c.Name, err)
		}
	}
	if len(r.Comparisons) > 0 {
		if err := atomicfile.Write(filepath.Join(dir, "comparisons.csv"), []byte(r.comparisonsCSV(compared))); err != nil {
			return err
		}
	}
	figures, err := r.plot(dir, gains, compared)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, "report.md"), []byte(r.markdown(gains, compared, figures)))
}

// gains are the gains of r's points over the fastest other, in their order.
func (r *MapReport) gains() ([]Gain, error) { return r.gainsAgainst(nil) }

// gainsAgainst are the gains of r's points over the fastest of against (see GainAgainst).
func (r *MapReport) gainsAgainst(against []string) ([]Gain, error) {
	out := make([]Gain, len(r.Points))
	for i, p := range r.Points {
		g, err := p.GainAgainst(against)
		if err != nil {
			return nil, err
		}
		out[i] = g
	}
	return out, nil
}

// Verdict says which side of zero g is on, or that it is inside the model's error.
func (r *MapReport) Verdict(g float64) string {
	switch {
	case math.IsNaN(g):
		return ""
	case g > r.ModelError:
		return "wins"
	case g < -r.ModelError:
		return "loses"
	}
	return "within model error"
}

func (r *MapReport) models() []string {
	var out []string
	for _, p := range r.Points {
		if !slices.Contains(out, p.Model) {
			out = append(out, p.Model)
		}
	}
	return out
}

func (r *MapReport) pointsCSV() string {
	var b strings.Builder
	b.WriteString("model,setting,x,y,workers,bandwidth_bps,latency_ns,select_call_ns,select_element_ns,pipeline,iteration_ms,samples_per_s,selection_ms,exposed_comm_ms,bytes_per_step\n")
	for _, p := range r.Points {
		c := p.Constants
		for _, q := range p.Pipelines {
			fmt.Fprintf(&b, "%s,%s,%s,%s,%d,%s,%d,%s,%s,%s,%s,%s,%s,%s,%s\n", p.Model, csvField(p.Setting), num(p.X), num(p.Y),
				c.Workers, num(c.BitsPerSecond), int64(c.Latency), num(c.SelectCallNS), num(c.SelectElementNS),
				q.Pipeline, num(q.IterationMS), num(q.SamplesPerS), num(q.SelectionMS), num(q.ExposedCommMS), num(q.BytesPerStep))
		}
	}
	return b.String()
}

func (r *MapReport) gainsCSV(gains []Gain) string {
	var b strings.Builder
	b.WriteString("model,setting,x,y,ssfusion_ms,best,best_ms,gain_over_best,dense_ms,gain_over_dense,fastest,verdict\n")
	for i, g := range gains {
		fmt.Fprintf(&b, "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", g.Model, csvField(r.Points[i].Setting), num(g.X), num(g.Y),
			num(g.SSFusionMS), g.Best, num(g.BestMS), num(g.OverBest), num(g.DenseMS), num(g.OverDense), g.Fastest, r.Verdict(g.OverBest))
	}
	return b.String()
}

func (r *MapReport) comparisonsCSV(compared [][]Gain) string {
	var b strings.Builder
	b.WriteString("comparison,against,model,setting,x,y,ssfusion_ms,best,best_ms,gain,verdict\n")
	for i, c := range r.Comparisons {
		for j, g := range compared[i] {
			fmt.Fprintf(&b, "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", csvField(c.Name), csvField(strings.Join(c.Against, " ")), g.Model,
				csvField(r.Points[j].Setting), num(g.X), num(g.Y), num(g.SSFusionMS), g.Best, num(g.BestMS), num(g.OverBest), r.Verdict(g.OverBest))
		}
	}
	return b.String()
}

// csvField quotes s when it holds a comma.
func csvField(s string) string {
	if strings.ContainsAny(s, ",\"") {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}

// num writes v in full, or nothing for NaN.
func num(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// grid is the gain (or fastest pipeline's index in names) of model's grid points.
func (r *MapReport) grid(model string, gains []Gain, value func(Gain) float64) plots.Grid {
	ys := []float64{0}
	if r.Y.Name != "" {
		ys = r.Y.Values
	}
	z := make([][]float64, len(ys))
	for i := range z {
		z[i] = make([]float64, len(r.X.Values))
		for j := range z[i] {
			z[i][j] = math.NaN()
		}
	}
	for i, p := range r.Points {
		if p.Model != model || p.Setting != "" {
			continue
		}
		yi, xi := slices.Index(ys, p.Y), slices.Index(r.X.Values, p.X)
		if yi >= 0 && xi >= 0 {
			z[yi][xi] = value(gains[i])
		}
	}
	return plots.Grid{X: r.X.Values, Y: ys, Z: z, LogX: r.X.log(), LogY: r.Y.log(),
		XLabel: r.X.Label(), YLabel: r.Y.labelOr(""), XName: r.X.Format, YName: r.Y.formatOr()}
}

// marks are the named settings inside the map's ranges, at their axis values.
func (r *MapReport) marks(model string) []plots.Mark {
	var out []plots.Mark
	for i, p := range r.Points {
		if p.Model != model || p.Setting == "" || !r.X.covers(p.X) || (r.Y.Name != "" && !r.Y.covers(p.Y)) {
			continue
		}
		out = append(out, plots.Mark{Label: markLabel(i, r.Points), X: p.X, Y: p.Y})
	}
	return out
}

// markLabel is a named point's letter: A for the first named setting, and so on.
func markLabel(i int, points []MapPoint) string {
	n := 0
	for _, p := range points[:i] {
		if p.Model == points[i].Model && p.Setting != "" {
			n++
		}
	}
	return string(rune('A' + n))
}

func (r *MapReport) plot(dir string, gains []Gain, compared [][]Gain) (map[string][]string, error) {
	figures := map[string][]string{}
	for _, model := range r.models() {
		slug := slugify(model)
		if r.Y.Name == "" {
			g := r.grid(model, gains, func(g Gain) float64 { return 100 * g.OverBest })
			d := r.grid(model, gains, func(g Gain) float64 { return 100 * g.OverDense })
			file := slug + "-gain.png"
			series := []plots.Series{{Name: "over the fastest other", X: g.X, Y: g.Z[0]}, {Name: "over dense", X: d.X, Y: d.Z[0]}}
			if err := plots.Lines(filepath.Join(dir, file), model+": SSFusion's predicted gain", r.X.Label(), "% throughput", series, r.X.log()); err != nil {
				return nil, err
			}
			figures[model] = []string{file}
			continue
		}
		names := r.pipelineNames()
		gain := r.grid(model, gains, func(g Gain) float64 { return g.OverBest })
		fastest := r.grid(model, gains, func(g Gain) float64 { return float64(slices.Index(names, g.Fastest)) })
		files := []string{slug + "-gain.png", slug + "-fastest.png"}
		title := fmt.Sprintf("%s: SSFusion's gain over the fastest other", model)
		if err := plots.GainMap(filepath.Join(dir, files[0]), title, gain, r.ModelError, r.marks(model)); err != nil {
			return nil, err
		}
		if err := plots.RegionMap(filepath.Join(dir, files[1]), model+": the fastest pipeline", fastest, names, r.marks(model)); err != nil {
			return nil, err
		}
		for i, c := range r.Comparisons {
			file := fmt.Sprintf("%s-gain-%s.png", slug, slugify(c.Name))
			title := fmt.Sprintf("%s: SSFusion's gain over %s", model, c.Name)
			g := r.grid(model, compared[i], func(g Gain) float64 { return g.OverBest })
			if err := plots.GainMap(filepath.Join(dir, file), title, g, r.ModelError, r.marks(model)); err != nil {
				return nil, err
			}
			files = append(files, file)
		}
		figures[model] = files
	}
	return figures, nil
}

func (r *MapReport) pipelineNames() []string {
	var out []string
	for _, p := range r.Points {
		for _, q := range p.Pipelines {
			if !slices.Contains(out, q.Pipeline) {
				out = append(out, q.Pipeline)
			}
		}
	}
	return out
}

func (r *MapReport) markdown(gains []Gain, compared [][]Gain, figures map[string][]string) string {
	var b strings.Builder
	b.WriteString("# Where SSFusion wins: a map\n\n")
	fmt.Fprintf(&b, "SSFusion's predicted throughput gain over the fastest of the other pipelines but dense, ")
	if r.Y.Name != "" {
		fmt.Fprintf(&b, "over %s (across) and %s (down). ", r.X.Name, r.Y.Name)
	} else {
		fmt.Fprintf(&b, "over %s. ", r.X.Name)
	}
	fmt.Fprintf(&b, "A gain within ±%.1f%% (the simulator's model error) is no verdict: `~` in the tables, between the dashed contours in the figures; the solid contour is zero.\n\n", 100*r.ModelError)
	if r.Command != "" {
		fmt.Fprintf(&b, "Made by `%s`; run again, it goes on from the points it kept in %s.\n\n", r.Command, MapFile)
	}
	b.WriteString(revisionsLine(r.Points) + "\n\n")
	b.WriteString("| setting | value |\n|---|---|\n")
	for _, k := range slices.Sorted(maps.Keys(r.Setting)) {
		fmt.Fprintf(&b, "| %s | %s |\n", k, r.Setting[k])
	}
	for _, model := range r.models() {
		fmt.Fprintf(&b, "\n## %s\n\n", model)
		for _, f := range figures[model] {
			fmt.Fprintf(&b, "![%s](%s)\n", f, f)
		}
		b.WriteString("\n")
		b.WriteString(r.Summary(model, gains) + "\n\n")
		for i, c := range r.Comparisons {
			fmt.Fprintf(&b, "Against %s (the faster of %s): %s %s\n\n", c.Name, strings.Join(c.Against, ", "),
				r.verdicts(model, compared[i]), r.namedGains(model, compared[i]))
		}
		r.gainTable(&b, model, gains)
		r.namedTable(&b, model, gains)
		r.namedSelection(&b, model)
	}
	r.sources(&b)
	fmt.Fprintf(&b, "\nCost: %d points, %s of simulation in all (wall clock, summed over the runs that made them).\n",
		len(r.Points), time.Duration(r.seconds()*float64(time.Second)).Round(time.Second))
	return b.String()
}

// seconds is the time r's points took to simulate.
func (r *MapReport) seconds() float64 {
	total := 0.0
	for _, p := range r.Points {
		total += p.Seconds
	}
	return total
}

// Summary says in words where on model's grid SSFusion wins, is within the model error and
// loses against the fastest other, each as the ranges of the axes its points span, and
// which pipeline is fastest how often.
func (r *MapReport) Summary(model string, gains []Gain) string {
	return r.verdicts(model, gains) + " Fastest of all: " + r.fastest(model, gains) + "."
}

// fastest counts how often each pipeline is the fastest of all on model's grid, most often
// first: "powersgd at 12, oktopk at 7".
func (r *MapReport) fastest(model string, gains []Gain) string {
	count := map[string]int{}
	for i, p := range r.Points {
		if p.Model == model && p.Setting == "" {
			count[gains[i].Fastest]++
		}
	}
	names := slices.SortedFunc(maps.Keys(count), func(a, b string) int {
		if d := count[b] - count[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s at %d", name, count[name]))
	}
	return strings.Join(parts, ", ")
}

// verdicts says over which ranges of the axes SSFusion wins, ties and loses on model's
// grid: "Of 30 points, SSFusion wins at none; ...".
func (r *MapReport) verdicts(model string, gains []Gain) string {
	classes := map[string][]MapPoint{}
	n := 0
	for i, p := range r.Points {
		if p.Model != model || p.Setting != "" {
			continue
		}
		n++
		v := r.Verdict(gains[i].OverBest)
		classes[v] = append(classes[v], p)
	}
	var parts []string
	for _, v := range []string{"wins", "within model error", "loses"} {
		ps := classes[v]
		if len(ps) == 0 {
			parts = append(parts, fmt.Sprintf("%s at none", v))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s at %d (%s)", v, len(ps), r.span(ps)))
	}
	return fmt.Sprintf("Of %d points, SSFusion %s.", n, strings.Join(parts, "; "))
}

// span is the ranges of the axes that points cover, as "bandwidth 1Gbit-11Gbit, select-call
// 1us-200us".
func (r *MapReport) span(points []MapPoint) string {
	describe := func(a Axis, value func(MapPoint) float64) string {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, p := range points {
			lo, hi = math.Min(lo, value(p)), math.Max(hi, value(p))
		}
		if lo == hi {
			return a.Name + " " + a.Format(lo)
		}
		return fmt.Sprintf("%s %s-%s", a.Name, a.Format(lo), a.Format(hi))
	}
	s := describe(r.X, func(p MapPoint) float64 { return p.X })
	if r.Y.Name != "" {
		s = describe(r.Y, func(p MapPoint) float64 { return p.Y }) + ", " + s
	}
	return s
}

// gainTable writes model's gains over the fastest other, with that pipeline's name.
func (r *MapReport) gainTable(b *strings.Builder, model string, gains []Gain) {
	ys := []float64{0}
	head := r.X.Name
	if r.Y.Name != "" {
		ys, head = r.Y.Values, r.Y.Name+" \\ "+r.X.Name
	}
	fmt.Fprintf(b, "Gain over the fastest other (which one):\n\n| %s |", head)
	for _, x := range r.X.Values {
		fmt.Fprintf(b, " %s |", r.X.Format(x))
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(r.X.Values)) + "\n")
	for _, y := range ys {
		label := ""
		if r.Y.Name != "" {
			label = r.Y.Format(y)
		}
		fmt.Fprintf(b, "| %s |", label)
		for _, x := range r.X.Values {
			i := slices.IndexFunc(r.Points, func(p MapPoint) bool { return p.Model == model && p.Setting == "" && p.X == x && p.Y == y })
			if i < 0 {
				b.WriteString(" |")
				continue
			}
			fmt.Fprintf(b, " %s (%s) |", r.gainCell(gains[i].OverBest), gains[i].Best)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// gainCell writes a gain in percent, with ~ before it when it is within the model error.
func (r *MapReport) gainCell(g float64) string {
	if math.IsNaN(g) {
		return "-"
	}
	s := fmt.Sprintf("%+.0f%%", 100*g)
	if r.Verdict(g) == "within model error" {
		s = "~" + s
	}
	return s
}

func (r *MapReport) namedTable(b *strings.Builder, model string, gains []Gain) {
	first := true
	for i, p := range r.Points {
		if p.Model != model || p.Setting == "" {
			continue
		}
		if first {
			b.WriteString("At the named settings, each at all its own constants:\n\n| | setting | workers | bandwidth | latency | top-k per call | per element | over the fastest other | over dense | verdict |\n|---|---|---|---|---|---|---|---|---|---|\n")
			first = false
		}
		c, g := p.Constants, gains[i]
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %.3gns | %s (%s) | %s | %s |\n", markLabel(i, r.Points), p.Setting, c.Workers,
			FormatBandwidth(c.BitsPerSecond), FormatDuration(c.Latency), formatNS(c.SelectCallNS), c.SelectElementNS,
			r.gainCell(g.OverBest), g.Best, r.gainCell(g.OverDense), r.Verdict(g.OverBest))
	}
	if !first {
		b.WriteString("\n")
	}
}

// namedSelection writes each pipeline's selection a step at each named setting: the part
// on the backward path, and all of it.
func (r *MapReport) namedSelection(b *strings.Builder, model string) {
	names := r.pipelineNames()
	first := true
	for i, p := range r.Points {
		if p.Model != model || p.Setting == "" {
			continue
		}
		if first {
			b.WriteString("Selection a step at the named settings, ms on the backward path / in all:\n\n| |")
			for _, n := range names {
				fmt.Fprintf(b, " %s |", n)
			}
			b.WriteString("\n|---|" + strings.Repeat("---|", len(names)) + "\n")
			first = false
		}
		fmt.Fprintf(b, "| %s |", markLabel(i, r.Points))
		for _, n := range names {
			j := slices.IndexFunc(p.Pipelines, func(q Point) bool { return q.Pipeline == n })
			if j < 0 {
				b.WriteString(" - |")
				continue
			}
			q := p.Pipelines[j]
			fmt.Fprintf(b, " %.2f / %.2f |", q.SelectionMS, q.SelectionTotalMS)
		}
		b.WriteString("\n")
	}
	if !first {
		b.WriteString("\n")
	}
}

// namedGains writes the gain at each named setting, as "At the named settings: A -8%
// (powersgd), ...".
func (r *MapReport) namedGains(model string, gains []Gain) string {
	var parts []string
	for i, p := range r.Points {
		if p.Model == model && p.Setting != "" {
			parts = append(parts, fmt.Sprintf("%s %s (%s)", markLabel(i, r.Points), r.gainCell(gains[i].OverBest), gains[i].Best))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "At the named settings: " + strings.Join(parts, ", ") + "."
}

// sources lists where each named setting's constants come from.
func (r *MapReport) sources(b *strings.Builder) {
	b.WriteString("\n## Sources of the named settings\n\n")
	for _, n := range NamedSettings() {
		fmt.Fprintf(b, "- **%s**:", n.Name)
		for _, s := range n.Sources {
			v := ""
			if s.Value != "" {
				v = " " + s.Value
			}
			fmt.Fprintf(b, " %s%s: %s;", s.Constant, v, s.From)
		}
		b.WriteString("\n")
	}
}

// revisionsLine says which source revision simulated the points: one, or, for a map resumed
// by other builds, each with its count of points, so that a mixed map says so at its top.
func revisionsLine(points []MapPoint) string {
	var order []string
	count := map[string]int{}
	for _, p := range points {
		rev := cmp.Or(p.Revision, "unknown")
		if count[rev] == 0 {
			order = append(order, rev)
		}
		count[rev]++
	}
	switch len(order) {
	case 0:
		return "No point simulated yet."
	case 1:
		return fmt.Sprintf("Simulated at revision %s.", order[0])
	}
	parts := make([]string, len(order))
	for i, rev := range order {
		noun := "points"
		if count[rev] == 1 {
			noun = "point"
		}
		parts[i] = fmt.Sprintf("%s (%d %s)", rev, count[rev], noun)
	}
	return fmt.Sprintf("**Mixed revisions**: the points were simulated by %d builds: %s.", len(order), strings.Join(parts, ", "))
}
