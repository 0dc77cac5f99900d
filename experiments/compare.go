package experiments

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/ssfusion/ssfusion/internal/atomicfile"
	"github.com/ssfusion/ssfusion/plots"
)

// Compare is an experiment's test of every seed group against a reference group.
type Compare struct {
	// Reference names the reference groups: a pipeline (dense, in the usual case), or
	// KEY=VALUE for the groups whose value on the matrix axis KEY is VALUE (as it reads in
	// the cells' folder names), such as safusion-align=true.
	Reference string
	// Margin is the equivalence margin: a group whose difference from the reference lies
	// within ±Margin with 95% confidence is called equivalent. It is in accuracy points
	// (perplexity for a language model), or for throughput in percent of the reference's.
	Margin float64
	// Figure is what is compared: the final test accuracy ("accuracy", the default;
	// perplexity for a language model) or the training throughput in samples per second
	// ("throughput").
	Figure string
	// Pairs are the tests between groups besides those against the reference.
	Pairs []Pair
}

const (
	figureAccuracy   = "accuracy"
	figureThroughput = "throughput"
)

// alpha is the level of every test in a comparison: 95% confidence.
const alpha = 0.05

func parseCompare(n *yaml.Node) (*Compare, error) {
	var raw struct {
		Reference string    `yaml:"reference"`
		Margin    *float64  `yaml:"margin"`
		Figure    string    `yaml:"figure"`
		Pairs     yaml.Node `yaml:"pairs"`
	}
	if err := n.Decode(&raw); err != nil {
		return nil, fmt.Errorf("line %d: want {reference: PIPELINE, margin: POINTS}: %w", n.Line, err)
	}
	for i := 0; n.Kind == yaml.MappingNode && i < len(n.Content); i += 2 {
		if k := n.Content[i].Value; k != "reference" && k != "margin" && k != "figure" && k != "pairs" {
			return nil, fmt.Errorf("line %d: unknown key %q (want reference, margin, figure, pairs)", n.Content[i].Line, k)
		}
	}
	switch raw.Figure {
	case "":
		raw.Figure = figureAccuracy
	case figureAccuracy, figureThroughput:
	default:
		return nil, fmt.Errorf("line %d: figure %q: compare accuracy or throughput", n.Line, raw.Figure)
	}
	switch {
	case raw.Reference == "":
		return nil, fmt.Errorf("line %d: reference: name the pipeline every group is tested against, e.g. dense", n.Line)
	case raw.Margin == nil:
		return nil, fmt.Errorf("line %d: margin: state the equivalence margin up front, in accuracy points, e.g. 0.5", n.Line)
	case !(*raw.Margin > 0) || math.IsInf(*raw.Margin, 0):
		return nil, fmt.Errorf("line %d: margin must be a positive number of points, got %g", n.Line, *raw.Margin)
	}
	c := &Compare{Reference: raw.Reference, Margin: *raw.Margin, Figure: raw.Figure}
	if raw.Pairs.Kind != 0 {
		var err error
		if c.Pairs, err = parsePairs(&raw.Pairs); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// check refuses a comparison the matrix cannot make: it needs seeds to test with, and a
// reference by axis names an axis and one of its values.
func (c *Compare) check(axes []Axis) error {
	if !slices.ContainsFunc(axes, func(a Axis) bool { return a.Key == seedKey && a.size() >= 2 }) {
		return errors.New("a comparison tests groups of seeds: sweep seed over at least two values")
	}
	for _, p := range c.Pairs {
		if err := p.check(axes); err != nil {
			return err
		}
	}
	key, value, byAxis := strings.Cut(c.Reference, "=")
	if !byAxis {
		return nil
	}
	i := slices.IndexFunc(axes, func(a Axis) bool { return a.Key == key })
	switch {
	case i < 0:
		return fmt.Errorf("reference %s: %s is not an axis of the matrix", c.Reference, key)
	case !slices.Contains(axes[i].folders(), value):
		return fmt.Errorf("reference %s: the axis %s has no value %s (it has %s)", c.Reference, key, value, strings.Join(axes[i].folders(), ", "))
	}
	return nil
}

// isReference tells whether g is one of the comparison's reference groups.
func (c *Compare) isReference(spec *Spec, g *group) bool {
	key, value, byAxis := strings.Cut(c.Reference, "=")
	if !byAxis {
		return g.pipeline() == c.Reference
	}
	i := slices.IndexFunc(spec.Matrix, func(a Axis) bool { return a.Key == key })
	return i >= 0 && axisValue(spec.Matrix[i], g.all[0].cell) == value
}

// sample is a figure's values over a group's seeds, with their mean and the half-width of
// its 95% confidence interval (Student's t).
type sample struct {
	xs         []float64
	mean, half float64 // half is NaN for fewer than two values
}

func newSample(xs []float64) sample {
	s := sample{xs: xs, mean: math.NaN(), half: math.NaN()}
	if len(xs) == 0 {
		return s
	}
	s.mean = stat.Mean(xs, nil)
	if n := float64(len(xs)); n >= 2 {
		sd := stat.StdDev(xs, nil)
		s.half = tQuantile(1-alpha/2, n-1) * sd / math.Sqrt(n)
	}
	return s
}

func tQuantile(p, df float64) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(p)
}

func tCDF(x, df float64) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.CDF(x)
}

// difference is a group's figure against the reference's: Welch's two-sample t-test,
// which does not assume equal variances, and the two one-sided tests (TOST) of
// equivalence within ±margin.
type difference struct {
	diff, half float64 // the difference of the means and its 95% interval's half-width
	p          float64 // two-sided p of "the means differ"
	pEquiv     float64 // TOST p of "the difference lies within ±margin"
}

// compareSamples tests a against ref; both need two values at least.
func compareSamples(a, ref sample, margin float64) (difference, error) {
	if len(a.xs) < 2 || len(ref.xs) < 2 {
		return difference{}, errors.New("needs two seeds on each side")
	}
	va, vr := stat.Variance(a.xs, nil)/float64(len(a.xs)), stat.Variance(ref.xs, nil)/float64(len(ref.xs))
	d := difference{diff: a.mean - ref.mean}
	se := math.Sqrt(va + vr)
	if se == 0 {
		// Seeds that agree exactly (a deterministic figure): the difference is what it is.
		d.half, d.p, d.pEquiv = 0, 1, 0
		if d.diff != 0 {
			d.p = 0
		}
		if math.Abs(d.diff) >= margin {
			d.pEquiv = 1
		}
		return d, nil
	}
	df := (va + vr) * (va + vr) / (va*va/float64(len(a.xs)-1) + vr*vr/float64(len(ref.xs)-1))
	t := d.diff / se
	d.half = tQuantile(1-alpha/2, df) * se
	d.p = 2 * tCDF(-math.Abs(t), df)
	lower := 1 - tCDF((d.diff+margin)/se, df) // H0: diff <= -margin
	upper := tCDF((d.diff-margin)/se, df)     // H0: diff >= +margin
	d.pEquiv = max(lower, upper)
	return d, nil
}

// verdict reads the two tests: equivalent when TOST rejects a difference beyond the margin,
// lower or higher when Welch's test rejects equal means, undecided when neither does.
func (d difference) verdict() string {
	equivalent := d.pEquiv < alpha
	differs := d.p < alpha
	direction := "higher"
	if d.diff < 0 {
		direction = "lower"
	}
	switch {
	case equivalent && differs:
		return "equivalent, though " + direction
	case equivalent:
		return "equivalent"
	case differs:
		return direction
	}
	return "undecided"
}

func trimFloat(v float64) string { return fmt.Sprintf("%g", v) }

// comparisonRow is one group's line of the comparison, kept for the report and the CSV.
type comparisonRow struct {
	group, reference string
	acc              sample // in points (or perplexity)
	bytes            *float64
	diff             *difference
	problem          string // why there is no test, when there is none
}

// comparisons tests every group that is not a reference against its reference group.
func comparisons(spec *Spec, groups []*group) []comparisonRow {
	figure := spec.Compare.value(groups[0].all[0].cell.Config.IsLanguageModel())
	refs, axes := referenceGroups(spec, groups)
	var rows []comparisonRow
	for _, g := range groups {
		row := comparisonRow{group: g.name, acc: newSample(g.values(figure))}
		if s := g.over(func(r result) *float64 { return r.sum.Traffic.BytesSentPerStep }); s.n > 0 {
			row.bytes = &s.mean
		}
		if spec.Compare.isReference(spec, g) {
			row.problem = "the reference"
			rows = append(rows, row)
			continue
		}
		ref := matchingReference(spec, g, refs, axes)
		if ref == nil {
			row.problem = fmt.Sprintf("no %s group of this setting", spec.Compare.Reference)
			rows = append(rows, row)
			continue
		}
		row.reference = ref.name
		refSample := newSample(ref.values(figure))
		d, err := compareSamples(row.acc, refSample, spec.Compare.marginAgainst(refSample))
		if err != nil {
			row.problem = err.Error()
		} else {
			row.diff = &d
		}
		rows = append(rows, row)
	}
	return rows
}

// marginAgainst is the equivalence margin in the figure's own unit when ref is the sample
// tested against: for throughput the margin is a percentage of its mean.
func (c *Compare) marginAgainst(ref sample) float64 {
	if c.Figure == figureThroughput {
		return c.Margin * (ref.mean / 100)
	}
	return c.Margin
}

// value is the figure the comparison tests, of one cell: accuracy in points, perplexity,
// or samples per second.
func (c *Compare) value(lm bool) func(result) *float64 {
	return func(r result) *float64 {
		switch {
		case c.Figure == figureThroughput:
			return &r.sum.Throughput.SamplesPerS
		case lm:
			return r.sum.Eval.Perplexity
		case r.sum.Eval.Accuracy == nil:
			return nil
		}
		return ptr(100 * *r.sum.Eval.Accuracy)
	}
}

// words names the comparison's figure, its unit in the report's cells, and its margin.
func (c *Compare) words(lm bool) (what, unit, margin string) {
	switch {
	case c.Figure == figureThroughput:
		return "throughput (samples/s)", "", trimFloat(c.Margin) + "% of the reference's"
	case lm:
		return "perplexity", "", trimFloat(c.Margin)
	}
	return "accuracy", "%", trimFloat(c.Margin) + " points"
}

// values is f over the group's counted seeds that have it.
func (g *group) values(f func(result) *float64) []float64 {
	var xs []float64
	for _, r := range g.counted {
		if v := f(r); v != nil {
			xs = append(xs, *v)
		}
	}
	return xs
}

// referenceGroups returns the reference pipeline's groups and the axes along which they
// vary: the axes a group must match its reference on.
func referenceGroups(spec *Spec, groups []*group) ([]*group, []Axis) {
	var refs []*group
	for _, g := range groups {
		if spec.Compare.isReference(spec, g) {
			refs = append(refs, g)
		}
	}
	refKey, _, byAxis := strings.Cut(spec.Compare.Reference, "=")
	var axes []Axis
	for _, a := range spec.Matrix {
		if a.Key == seedKey || len(refs) == 0 || (byAxis && a.Key == refKey) {
			continue
		}
		first := axisValue(a, refs[0].all[0].cell)
		if slices.ContainsFunc(refs, func(r *group) bool { return axisValue(a, r.all[0].cell) != first }) {
			axes = append(axes, a)
		}
	}
	return refs, axes
}

// matchingReference is the reference group that agrees with g on axes; nil when none or
// several do.
func matchingReference(spec *Spec, g *group, refs []*group, axes []Axis) *group {
	var found *group
	for _, r := range refs {
		if slices.ContainsFunc(axes, func(a Axis) bool { return axisValue(a, r.all[0].cell) != axisValue(a, g.all[0].cell) }) {
			continue
		}
		if found != nil {
			return nil
		}
		found = r
	}
	return found
}

// axisValue is the cell's value on the axis as it reads in folder names.
func axisValue(a Axis, c Cell) string {
	if a.Bundles != nil {
		return c.Bundles[a.Key]
	}
	v := c.Values[a.Key]
	if folder, err := folderValue(a.Key, v); err == nil {
		return folder
	}
	return fmt.Sprint(v)
}

// writeComparison writes the comparison table and says how to read it.
func writeComparison(b *strings.Builder, spec *Spec, rows []comparisonRow, figures []tradeoffFigure, lm bool) {
	what, unit, margin := spec.Compare.words(lm)
	fmt.Fprintf(b, "## Against %s\n\n", spec.Compare.Reference)
	fmt.Fprintf(b, "Each group's %s over its seeds: the mean with its 95%% confidence interval (Student's t), and its difference from the %s group of its setting with that difference's 95%% interval. p is Welch's two-sided t-test of equal means; \"equivalent\" means the two one-sided tests put the difference within ±%s (the margin this experiment states up front) at the 5%% level; \"undecided\" means neither test decides, so more seeds are needed.\n\n",
		what, spec.Compare.Reference, margin)
	fmt.Fprintf(b, "| group | seeds | %s, mean [95%% CI] | bytes sent per step | difference [95%% CI] | p (Welch) | p (equivalence) | verdict |\n|---|---|---|---|---|---|---|---|\n", what)
	for _, r := range rows {
		fmt.Fprintf(b, "| %s | %d | %s | %s |", r.group, len(r.acc.xs), r.acc.interval(unit), bytesText(r.bytes))
		b.WriteString(testCells(r.diff, r.problem) + "\n")
	}
	b.WriteString("\nThe same figures, unrounded, are in comparison.csv.\n\n")
	for _, f := range figures {
		fmt.Fprintf(b, "![%s](%s)\n\n", f.title, f.file)
	}
	if len(figures) > 0 {
		b.WriteString("Each point is a group: its mean final accuracy with a bar over its 95% interval, against the bytes it sent per step (log scale), so that a pipeline's accuracy can be read against what it paid in traffic.\n\n")
	}
}

// testCells writes a test's last cells of a report table: the difference with its
// interval, the two p-values and the verdict; without a test, why there is none.
func testCells(d *difference, problem string) string {
	if d == nil {
		return fmt.Sprintf(" %s | | | |", problem)
	}
	return fmt.Sprintf(" %+.2f [%+.2f, %+.2f] | %s | %s | %s |", d.diff, d.diff-d.half, d.diff+d.half, pText(d.p), pText(d.pEquiv), d.verdict())
}

// csvFields is a test's figures for a CSV row, unrounded: the difference, its interval's
// ends, the two p-values and the verdict; all empty without a test.
func (d *difference) csvFields() []string {
	if d == nil {
		return make([]string, 6)
	}
	return []string{csvNumber(d.diff), csvNumber(d.diff - d.half), csvNumber(d.diff + d.half), csvNumber(d.p), csvNumber(d.pEquiv), d.verdict()}
}

// csvNumber writes v unrounded, and NaN (no value) as an empty cell.
func csvNumber(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// interval writes "mean [lo, hi]unit", or the lone value.
func (s sample) interval(unit string) string {
	switch {
	case len(s.xs) == 0:
		return "-"
	case math.IsNaN(s.half):
		return fmt.Sprintf("%.2f%s", s.mean, unit)
	}
	return fmt.Sprintf("%.2f [%.2f, %.2f]%s", s.mean, s.mean-s.half, s.mean+s.half, unit)
}

// pText writes a p-value to two significant figures, small ones as a bound.
func pText(p float64) string {
	if p < 0.001 {
		return "<0.001"
	}
	return fmt.Sprintf("%.2g", p)
}

// tradeoffFigure is one accuracy-against-traffic chart: the groups tested against one
// reference group, the reference among them.
type tradeoffFigure struct {
	file, title string
	points      []plots.Estimate
}

// tradeoffFigures groups the comparison's rows by their reference group, one chart each,
// named by the setting of its reference when there are several.
func tradeoffFigures(spec *Spec, groups []*group, rows []comparisonRow) []tradeoffFigure {
	if spec.Compare.Figure != figureAccuracy {
		return nil
	}
	refs, axes := referenceGroups(spec, groups)
	byName := map[string]*group{}
	for _, g := range groups {
		byName[g.name] = g
	}
	var figures []tradeoffFigure
	for _, ref := range refs {
		f := tradeoffFigure{file: "accuracy-traffic.png", title: "final test accuracy against bytes sent"}
		if len(refs) > 1 {
			var parts []string
			for _, a := range axes {
				parts = append(parts, a.Key+"-"+axisValue(a, ref.all[0].cell))
			}
			f.file = "accuracy-traffic_" + strings.Join(parts, "_") + ".png"
			f.title += ", " + strings.Join(parts, ", ")
		}
		for _, r := range rows {
			if (r.group != ref.name && r.reference != ref.name) || r.bytes == nil || len(r.acc.xs) == 0 || *r.bytes <= 0 {
				continue
			}
			half := r.acc.half
			if math.IsNaN(half) {
				half = 0
			}
			g := byName[r.group]
			f.points = append(f.points, plots.Estimate{Name: pointLabel(spec, g, axes), Pipeline: g.pipeline(),
				X: *r.bytes, Y: r.acc.mean, Lo: r.acc.mean - half, Hi: r.acc.mean + half})
		}
		if len(f.points) > 0 {
			figures = append(figures, f)
		}
	}
	return figures
}

// pointLabel names a group within its chart by its values on the axes the chart does not
// fix, the pipeline's first.
func pointLabel(spec *Spec, g *group, fixed []Axis) string {
	var parts []string
	for _, a := range spec.Matrix {
		if a.Key == seedKey || slices.ContainsFunc(fixed, func(f Axis) bool { return f.Key == a.Key }) {
			continue
		}
		v := axisValue(a, g.all[0].cell)
		if slices.Contains(a.sets(), "pipeline") {
			parts = append([]string{v}, parts...)
			continue
		}
		parts = append(parts, a.Key+" "+v)
	}
	return strings.Join(parts, ", ")
}

// comparisonCSV is the comparison as a table for other tools: every figure of the report's
// table, unrounded.
func comparisonCSV(rows []comparisonRow, margin float64) []byte {
	var b strings.Builder
	w := csv.NewWriter(&b)
	w.Write([]string{"group", "reference", "seeds", "mean", "ci_low", "ci_high", "bytes_sent_per_step", "difference", "difference_low", "difference_high", "p", "p_equivalence", "margin", "verdict"})
	for _, r := range rows {
		rec := []string{r.group, r.reference, strconv.Itoa(len(r.acc.xs)), csvNumber(r.acc.mean), csvNumber(r.acc.mean - r.acc.half), csvNumber(r.acc.mean + r.acc.half), ""}
		if r.bytes != nil {
			rec[6] = csvNumber(*r.bytes)
		}
		test := r.diff.csvFields()
		rec = append(append(rec, test[:5]...), csvNumber(margin), cmp.Or(test[5], r.problem))
		w.Write(rec)
	}
	w.Flush()
	return []byte(b.String())
}

// writeComparisonFiles writes groups.csv, each seed group's figures, and for an experiment
// that compares its groups comparison.csv and the accuracy-against-traffic charts.
func writeComparisonFiles(spec *Spec, results []result, dir string) error {
	if !seeded(results) {
		return nil
	}
	groups := groupResults(results)
	if err := atomicfile.Write(filepath.Join(dir, "groups.csv"), groupsCSV(groups)); err != nil {
		return err
	}
	if spec.Compare == nil {
		return nil
	}
	rows := comparisons(spec, groups)
	if err := atomicfile.Write(filepath.Join(dir, "comparison.csv"), comparisonCSV(rows, spec.Compare.Margin)); err != nil {
		return err
	}
	if len(spec.Compare.Pairs) > 0 {
		if err := atomicfile.Write(filepath.Join(dir, "pairs.csv"), pairsCSV(pairTests(spec, groups), spec.Compare.Margin)); err != nil {
			return err
		}
	}
	lm := groups[0].all[0].cell.Config.IsLanguageModel()
	yLabel := "final test accuracy (%)"
	if lm {
		yLabel = "final test perplexity"
	}
	for _, f := range tradeoffFigures(spec, groups, rows) {
		if err := plots.Tradeoff(filepath.Join(dir, f.file), f.title, "bytes sent per step and rank", yLabel, f.points); err != nil {
			return fmt.Errorf("drawing the accuracy against traffic: %w", err)
		}
	}
	return nil
}
