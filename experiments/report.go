package experiments

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ssfusion/ssfusion/internal/provenance"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/plots"
	"github.com/ssfusion/ssfusion/trainer"
)

// WriteReport writes the experiment's report.md into dir, beside its cells, and then its
// plots; the report is written even when a plot cannot be.
func WriteReport(spec *Spec, cells []Cell, dir string) error {
	results, err := readResults(spec, cells)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating the experiment's folder: %w", err)
	}
	md := render(spec, results)
	if _, err := os.Stat(filepath.Join(dir, AnalysisFile)); err == nil {
		title, rest, _ := strings.Cut(md, "\n\n")
		md = title + "\n\n" + analysisLine + "\n\n" + rest
	}
	if err := trainer.WriteFileAtomic(filepath.Join(dir, "report.md"), []byte(md)); err != nil {
		return err
	}
	if err := writeComparisonFiles(spec, results, dir); err != nil {
		return err
	}
	forPlots := plotCells(results)
	if len(forPlots) == 0 && seeded(results) {
		return nil // no seed has finished: nothing the plots would pool yet
	}
	if _, err := plots.Draw(dir, forPlots); err != nil {
		return fmt.Errorf("drawing the plots: %w", err)
	}
	return nil
}

// AnalysisFile is the hand-written reading of an experiment's results, kept in its folder
// beside the generated report, which links to it: what the figures show and why, with every
// figure it quotes marked with its source (see package internal/figures).
const AnalysisFile = "analysis.md"

const analysisLine = "What these results show, and why: [analysis.md](analysis.md). This report is generated from the cells' files; the analysis is written by hand, and every figure it quotes is checked against them."

// plotCells describes the cells for the plots, leaving out those whose results are stale.
// Seeds are drawn pooled by group, of the seeds the report counts.
func plotCells(results []result) []plots.Cell {
	var out []plots.Cell
	if seeded(results) {
		for _, g := range groupResults(results) {
			for _, r := range g.counted {
				c := r.cell
				out = append(out, plots.Cell{Name: c.Name, Pipeline: c.Config.Pipeline, Setting: c.GroupSetting, Group: c.Group, Dir: c.Config.Out})
			}
		}
		return out
	}
	for _, r := range results {
		if c := r.cell; len(r.stale) == 0 {
			out = append(out, plots.Cell{Name: c.Name, Pipeline: c.Config.Pipeline, Setting: c.Setting, Dir: c.Config.Out})
		}
	}
	return out
}

// result is what the report shows of one cell.
type result struct {
	cell    Cell
	sum     *trainer.Summary // nil: not run, or stale
	stale   []string         // the settings stale results were produced with differ in these
	best    *float64         // best test accuracy, or lowest perplexity
	toReach *float64         // wall-clock seconds to reach the target
	seeds   int              // for a seed group's mean (group.meanResult), how many seeds it pools
}

// Report renders the report of an experiment from its cells' summary.json and metrics.csv
// files. A cell that has not run yet, or stopped early, is marked so.
func Report(spec *Spec, cells []Cell) (string, error) {
	results, err := readResults(spec, cells)
	if err != nil {
		return "", err
	}
	return render(spec, results), nil
}

// readResults reads what every cell's folder holds.
func readResults(spec *Spec, cells []Cell) ([]result, error) {
	results := make([]result, len(cells))
	for i, c := range cells {
		r, err := readResult(c, spec.Target)
		if err != nil {
			return nil, fmt.Errorf("cell %s: %w", c.Name, err)
		}
		results[i] = r
	}
	return results, nil
}

// render writes the report of results.
func render(spec *Spec, results []result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", spec.Name)
	if spec.Description != "" {
		fmt.Fprintf(&b, "%s\n\n", strings.TrimSpace(spec.Description))
	}
	if len(spec.Env) > 0 {
		fmt.Fprintf(&b, "Environment overrides applied to every cell: %s.\n\n", envText(spec.Env))
	}
	if line := revisionsLine(results); line != "" {
		b.WriteString(line + "\n\n")
	}
	if !seeded(results) {
		writeRegime(&b, results)
		writeQualityTable(&b, "## Accuracy", spec, results)
		writeSpeedTable(&b, "## Speed and traffic", results)
		writeIndexEncoding(&b, results)
		writePlots(&b, results)
		writeTimelines(&b, results)
		writeProvenance(&b, results)
		return b.String()
	}
	// Seeds measure the same thing: the groups' figures come first, every cell's after.
	groups := groupResults(results)
	b.WriteString(seedNote)
	means := make([]result, len(groups))
	for i, g := range groups {
		means[i] = g.meanResult()
	}
	writeRegime(&b, means)
	writeGroupQualityTable(&b, spec, groups)
	if spec.Compare != nil {
		rows := comparisons(spec, groups)
		lm := groups[0].all[0].cell.Config.IsLanguageModel()
		writeComparison(&b, spec, rows, tradeoffFigures(spec, groups, rows), lm)
		writePairs(&b, spec, pairTests(spec, groups), lm)
	}
	writeGroupSpeedTable(&b, groups)
	writeGroupExtras(&b, groups)
	writePlots(&b, results)
	b.WriteString("\n## Per seed\n\n")
	writeQualityTable(&b, "### Accuracy, per seed", spec, results)
	writeSpeedTable(&b, "### Speed and traffic, per seed", results)
	writeIndexEncoding(&b, results)
	writeTimelines(&b, results)
	writeProvenance(&b, results)
	return b.String()
}

// writeTimelines shows the step timelines the cells recorded (--timeline-steps), each
// drawn in its cell's folder; nothing when none did.
func writeTimelines(b *strings.Builder, results []result) {
	var links []string
	for _, r := range results {
		if r.sum == nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(r.cell.Config.Out, "timeline.png")); err == nil {
			dir := filepath.Base(r.cell.Config.Out)
			links = append(links, fmt.Sprintf("### %s\n\n![timeline of %s](%s/timeline.png)\n\n(the trace, for chrome://tracing or ui.perfetto.dev: [%s](%s/%s))\n", r.cell.Name, r.cell.Name, dir, trainer.TimelineFile, dir, trainer.TimelineFile))
		}
	}
	if len(links) == 0 {
		return
	}
	b.WriteString("\n## Step timelines\n\nWhat rank 0's last steps spent their time on: the forward and backward pass, each gradient handed to the pipeline, each selection (on whichever goroutine ran it), each collective from its call to its completion, the wait for the pipeline after backward, and the update. A selection bar beside the backward bar ran alongside it.\n\n")
	b.WriteString(strings.Join(links, "\n") + "\n")
}

// writeProvenance says which builds and machines produced the cells' results: each
// distinct one with the number of cells it produced, in the order the cells first name it.
func writeProvenance(b *strings.Builder, results []result) {
	var origins []string
	cells := map[string]int{}
	var cost Cost
	for _, r := range results {
		if r.sum == nil {
			continue
		}
		cost.Cells++
		cost.Seconds += r.sum.WallSeconds
		o := originText(r.sum.Provenance)
		if cells[o] == 0 {
			origins = append(origins, o)
		}
		cells[o]++
	}
	if len(origins) == 0 {
		return
	}
	b.WriteString("\n## Provenance\n\n")
	for _, o := range origins {
		noun := "cells"
		if cells[o] == 1 {
			noun = "cell"
		}
		fmt.Fprintf(b, "- %d %s: %s\n", cells[o], noun, o)
	}
	fmt.Fprintf(b, "\nCost: %s (each cell's training wall-clock, summed).\n", cost)
}

// revisionsLine says which source revision produced the cells' results: one, or, when
// cells were kept from earlier builds, each with its count of cells, so that a report
// mixing revisions says so at its top. "" when no cell has results.
func revisionsLine(results []result) string {
	var order []string
	count := map[string]int{}
	for _, r := range results {
		if r.sum == nil {
			continue
		}
		rev := "unrecorded"
		if r.sum.Provenance.GoVersion != "" {
			rev = r.sum.Provenance.RevisionText()
		}
		if count[rev] == 0 {
			order = append(order, rev)
		}
		count[rev]++
	}
	switch len(order) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("Every cell ran at revision %s.", order[0])
	}
	parts := make([]string, len(order))
	for i, rev := range order {
		noun := "cells"
		if count[rev] == 1 {
			noun = "cell"
		}
		parts[i] = fmt.Sprintf("%s (%d %s)", rev, count[rev], noun)
	}
	return fmt.Sprintf("**Mixed revisions**: the cells ran at %d revisions: %s. The provenance at the end gives each build.", len(order), strings.Join(parts, ", "))
}

// originText describes the build and machine of p in a line.
func originText(p provenance.Info) string {
	if p.GoVersion == "" {
		return "not recorded (summaries written before they carried it)"
	}
	return fmt.Sprintf("revision %s, %s %s/%s, %s, GOMAXPROCS %d, matrix products: %s", p.RevisionText(), p.GoVersion, p.OS, p.Arch, p.CPU, p.GOMAXPROCS, p.GEMM)
}

// writeIndexEncoding counts ExDyna's index messages both ways, ours and its authors' code's,
// for the cells that report them; nothing when none do.
func writeIndexEncoding(b *strings.Builder, results []result) {
	var rows []string
	for _, r := range results {
		if r.sum == nil {
			continue
		}
		ours, theirs := r.sum.Extra[pipeline.IndexBytes], r.sum.Extra[pipeline.AuthorsIndexBytes]
		if ours > 0 && theirs > 0 {
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %.2fx |", cellName(r), bytesText(&ours), bytesText(&theirs), theirs/ours))
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("## ExDyna's index messages, two encodings\n\n")
	b.WriteString("What one rank allgathers per step: ours (a header, the sample's histogram, and the selected indices as uint32) and what the authors' code would send (int64 indices, every rank's message padded to the step's largest count).\n\n")
	b.WriteString("| cell | ours | authors' | authors' / ours |\n|---|---|---|---|\n")
	b.WriteString(strings.Join(rows, "\n") + "\n\n")
}

func readResult(c Cell, target float64) (result, error) {
	r := result{cell: c}
	s, err := readSummary(c.Config.Out)
	if err != nil || s == nil {
		return r, err
	}
	// Results of other settings are not this cell's: the report does not show them as if
	// they were (an interrupted run after the experiment file changed leaves such).
	if r.stale, err = differs(s, c); err != nil || len(r.stale) > 0 {
		return r, err
	}
	r.sum = s
	metrics, err := plots.ReadMetrics(filepath.Join(c.Config.Out, "metrics.csv"))
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, err
	}
	lm := c.Config.IsLanguageModel()
	for _, m := range metrics {
		v := m.EvalAccuracy
		if lm {
			v = m.EvalPerplexity
		}
		if m.Kind != "eval" || math.IsNaN(v) {
			continue
		}
		if r.best == nil || (!lm && v > *r.best) || (lm && v < *r.best) {
			r.best = ptr(v)
		}
		if target > 0 && r.toReach == nil && ((!lm && v >= target) || (lm && v <= target)) {
			r.toReach = ptr(m.WallS)
		}
	}
	return r, nil
}

// writeRegime states the ratio of dense communication to computation, which decides how
// much a pipeline that sends less can gain: the papers measured clusters where the two are
// of the same order.
func writeRegime(b *strings.Builder, results []result) {
	first := true
	for _, r := range results {
		if r.sum == nil || r.cell.Config.Pipeline != "dense" || r.sum.Workers < 2 {
			continue
		}
		t := r.sum.Throughput.StepMS
		if t.Compute <= 0 {
			continue
		}
		if first {
			b.WriteString("Regime: dense communication time per step against computation (compute is the forward and backward pass; communication is the time during which an allreduce was in flight).\n\n")
			first = false
		}
		name := "dense"
		if r.cell.Setting != "" {
			name += " " + r.cell.Setting
		}
		link := r.cell.Config.Bandwidth
		if link == "" {
			link = "unlimited"
		}
		seeds := ""
		if r.seeds > 0 {
			seeds = fmt.Sprintf(", mean of %d seeds", r.seeds)
		}
		fmt.Fprintf(b, "- %s (%d workers, link %s%s): communication %.0f ms, computation %.0f ms per step: ratio %.2f\n",
			name, r.sum.Workers, link, seeds, t.Comm, t.Compute, t.Comm/t.Compute)
	}
	if !first {
		b.WriteString("\n")
	}
}

func writeQualityTable(b *strings.Builder, heading string, spec *Spec, results []result) {
	lm := len(results) > 0 && results[0].cell.Config.IsLanguageModel()
	b.WriteString(heading + "\n\n" + qualityHeader(spec, lm, "| cell |"))

	for _, r := range results {
		if r.sum == nil {
			fmt.Fprintf(b, "| %s | %s |\n", r.cell.Name, notRun(r))
			continue
		}
		best := "-"
		if r.best != nil {
			best = qualityText(*r.best, lm)
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s |", cellName(r), r.sum.Steps, quality(r.sum.Eval), best, opt(r.sum.FinalLoss, "%.4f"))
		if spec.Target > 0 {
			reached := "not reached"
			if r.toReach != nil {
				reached = fmt.Sprintf("%.0f s", *r.toReach)
			}
			fmt.Fprintf(b, " %s |", reached)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// qualityHeader is the header and rule of an accuracy table whose rows start with the
// columns of first, for a language model (perplexity) or a classifier (accuracy).
func qualityHeader(spec *Spec, lm bool, first string) string {
	what, reach := "test accuracy", fmt.Sprintf("time to %.2f%%", 100*spec.Target)
	if lm {
		what, reach = "test perplexity", fmt.Sprintf("time to perplexity %.1f", spec.Target)
	}
	header := fmt.Sprintf("%s steps | final %s | best %s | final loss |", first, what, what)
	rule := strings.Repeat("|---", strings.Count(first, "|")-1+4) + "|"
	if spec.Target > 0 {
		header += " " + reach + " |"
		rule += "---|"
	}
	return header + "\n" + rule + "\n"
}

func writeSpeedTable(b *strings.Builder, heading string, results []result) {
	b.WriteString(heading + "\n\n")
	b.WriteString("| cell | samples/s | vs dense | step ms: total, compute, selection, comm, wait | bytes sent per step | density achieved | tensors missing per step | ranks agree |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	dense := map[string]float64{} // samples/s of the dense cell of each setting
	for _, r := range results {
		if r.sum != nil && r.cell.Config.Pipeline == "dense" {
			dense[r.cell.Setting] = r.sum.Throughput.SamplesPerS
		}
	}
	for _, r := range results {
		if r.sum == nil {
			fmt.Fprintf(b, "| %s | %s |\n", r.cell.Name, notRun(r))
			continue
		}
		s := r.sum
		speedup := "-"
		if d := dense[r.cell.Setting]; d > 0 && s.Throughput.SamplesPerS > 0 {
			speedup = fmt.Sprintf("%.2fx", s.Throughput.SamplesPerS/d)
		}
		t := s.Throughput.StepMS
		fmt.Fprintf(b, "| %s | %.1f | %s | %.1f, %.1f, %.1f, %.1f, %.1f | %s | %s | %s | %s |\n",
			cellName(r), s.Throughput.SamplesPerS, speedup, t.Total, t.Compute, t.Sparsify, t.Comm, t.Wait,
			bytesText(s.Traffic.BytesSentPerStep), densityText(s.Sparsity),
			opt(s.Sparsity.TensorsMissingPerStep, "%.1f"), agree(s.Consistency.ParamChecksumEqual))
	}
	b.WriteString("\nSteps overlap computation and communication, so the parts of a step can add up to more than its total.\n\n")
}

// notRun says why a cell shows no results.
func notRun(r result) string {
	if len(r.stale) > 0 {
		return "not run with these settings: its folder holds results of other ones (" + strings.Join(r.stale, "; ") + ")"
	}
	return "not run"
}

const plotsSection = `## Plots

![test accuracy against wall-clock time](accuracy-time.png)
![test accuracy against epoch](accuracy-epoch.png)
![training loss](loss.png)
![samples per second](throughput.png)
![time breakdown per step](breakdown.png)
![bytes and tensors missing per step](traffic.png)
![density achieved per step](density.png)
`

// writePlots links the figures the plots package draws; the imbalance figure only when a
// cell reports partition imbalance, as only then is it drawn.
func writePlots(b *strings.Builder, results []result) {
	b.WriteString(plotsSection)
	if slices.ContainsFunc(results, func(r result) bool { return r.sum != nil && r.sum.Sparsity.PartitionImbalance != nil }) {
		b.WriteString("![partition imbalance per step](imbalance.png)\n")
	}
}

// densityText is the achieved density, with ExDyna's partition imbalance when there is one.
func densityText(s trainer.Sparsity) string {
	text := opt(s.DensityAchieved, "%.4f")
	if s.PartitionImbalance != nil {
		text += fmt.Sprintf(" (partition imbalance %.2f)", *s.PartitionImbalance)
	}
	return text
}

func cellName(r result) string {
	if !r.sum.Complete {
		return fmt.Sprintf("%s (stopped at step %d)", r.cell.Name, r.sum.Steps)
	}
	return r.cell.Name
}

func ptr(v float64) *float64 { return &v }

// errCorruptSummary marks a summary.json that is not a summary.
var errCorruptSummary = errors.New("not a summary")

// readSummary reads dir/summary.json; nil without error when there is none.
func readSummary(dir string) (*trainer.Summary, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s trainer.Summary
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("reading %s: %w: %w", filepath.Join(dir, "summary.json"), errCorruptSummary, err)
	}
	return &s, nil
}

func quality(e trainer.Eval) string {
	switch {
	case e.Perplexity != nil:
		return qualityText(*e.Perplexity, true)
	case e.Accuracy != nil:
		return qualityText(*e.Accuracy, false)
	}
	return "-"
}

func qualityText(v float64, perplexity bool) string {
	if perplexity {
		return fmt.Sprintf("ppl %.2f", v)
	}
	return fmt.Sprintf("%.2f%%", 100*v)
}

func opt(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

func bytesText(v *float64) string {
	switch {
	case v == nil:
		return "-"
	case *v >= 1e6:
		return fmt.Sprintf("%.2f MB", *v/1e6)
	case *v >= 1e3:
		return fmt.Sprintf("%.1f KB", *v/1e3)
	}
	return fmt.Sprintf("%.0f B", *v)
}

func agree(v *bool) string {
	switch {
	case v == nil:
		return "-"
	case *v:
		return "yes"
	}
	return "**no**"
}
