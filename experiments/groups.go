package experiments

import (
	"encoding/csv"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/stat"

	"github.com/ssfusion/ssfusion/trainer"
)

// group is the cells of an experiment that differ in their seed alone, which measure the
// same thing: the report gives their mean and spread.
type group struct {
	name    string   // Cell.Group
	setting string   // Cell.GroupSetting
	all     []result // every seed's cell, in the matrix's order
	// counted are the seeds whose run finished with the cell's settings: a run that stopped
	// early (interrupted, diverged, failed) would pull the mean toward its early figures.
	counted []result
}

// seeded reports whether the experiment sweeps the seed, so that its report pools seeds.
func seeded(results []result) bool {
	return slices.ContainsFunc(results, func(r result) bool { return r.cell.Group != "" })
}

// groupResults pools results by seed group, the groups in the order they first appear.
func groupResults(results []result) []*group {
	var groups []*group
	byName := map[string]*group{}
	for _, r := range results {
		g := byName[r.cell.Group]
		if g == nil {
			g = &group{name: r.cell.Group, setting: r.cell.GroupSetting}
			byName[g.name] = g
			groups = append(groups, g)
		}
		g.all = append(g.all, r)
		if r.sum != nil && r.sum.Complete {
			g.counted = append(g.counted, r)
		}
	}
	return groups
}

// seedStat is a figure over the seeds of a group: the mean of the values and their sample
// standard deviation (n-1 in the denominator, the spread a reader expects of a few seeds).
type seedStat struct {
	mean, std float64 // std is NaN for fewer than two values, mean for none
	n         int
}

// statOf returns the mean and sample standard deviation of xs.
func statOf(xs []float64) seedStat {
	switch len(xs) {
	case 0:
		return seedStat{mean: math.NaN(), std: math.NaN()}
	case 1:
		return seedStat{mean: xs[0], std: math.NaN(), n: 1}
	}
	mean, std := stat.MeanStdDev(xs, nil)
	return seedStat{mean: mean, std: std, n: len(xs)}
}

// text writes the figure as "mean ± std", each by its own format, followed by unit; a lone
// value has no spread to show.
func (s seedStat) text(mean, std func(float64) string, unit string) string {
	switch {
	case s.n == 0:
		return "-"
	case s.n == 1:
		return mean(s.mean) + unit
	}
	return mean(s.mean) + " ± " + std(s.std) + unit
}

// over is the statistics of f over the group's counted seeds that have a value.
func (g *group) over(f func(result) *float64) seedStat {
	var xs []float64
	for _, r := range g.counted {
		if v := f(r); v != nil {
			xs = append(xs, *v)
		}
	}
	return statOf(xs)
}

// figure writes f over the counted seeds as text does, saying how many seeds it covers when
// some counted seeds lack it.
func (g *group) figure(f func(result) *float64, mean, std func(float64) string, unit string) string {
	s := g.over(f)
	text := s.text(mean, std, unit)
	if s.n > 0 && s.n < len(g.counted) {
		text += fmt.Sprintf(" (%d of %d seeds)", s.n, len(g.counted))
	}
	return text
}

// seeds says how many seeds the group's figures cover: "n=3", or "n=2 of 3" when a seed has
// not finished with these settings.
func (g *group) seeds() string {
	if len(g.counted) == len(g.all) {
		return fmt.Sprintf("n=%d", len(g.all))
	}
	return fmt.Sprintf("n=%d of %d", len(g.counted), len(g.all))
}

// pipeline is the pipeline the group's cells train with.
func (g *group) pipeline() string { return g.all[0].cell.Config.Pipeline }

// meanResult stands for the group where a figure of one run is needed: its summary holds
// the counted seeds' mean speed, which the regime compares.
func (g *group) meanResult() result {
	r := result{cell: g.all[0].cell}
	r.cell.Name, r.cell.Setting = g.name, g.setting
	if len(g.counted) == 0 {
		return r
	}
	mean := func(f func(result) *float64) float64 { return g.over(f).mean }
	step := func(part func(trainer.StepMS) float64) float64 {
		return mean(func(r result) *float64 { return ptr(part(r.sum.Throughput.StepMS)) })
	}
	sum := *g.counted[0].sum
	sum.Throughput = trainer.Throughput{
		SamplesPerS: mean(func(r result) *float64 { return &r.sum.Throughput.SamplesPerS }),
		StepMS: trainer.StepMS{
			Total:    step(func(s trainer.StepMS) float64 { return s.Total }),
			Compute:  step(func(s trainer.StepMS) float64 { return s.Compute }),
			Sparsify: step(func(s trainer.StepMS) float64 { return s.Sparsify }),
			Comm:     step(func(s trainer.StepMS) float64 { return s.Comm }),
			Wait:     step(func(s trainer.StepMS) float64 { return s.Wait }),
		},
	}
	r.sum, r.seeds = &sum, len(g.counted)
	return r
}

const seedNote = `Each row is a group of cells that differ in their seed alone: the mean ± the sample standard deviation (n-1) over the seeds whose run finished with these settings. n counts them; "n=2 of 3" says a seed stopped early, failed or has not run, and is left out (the tables per seed, at the end, show every cell). A time to the target is averaged only when every counted seed reached it; otherwise the row says how many did ("2/3 reached"). The plots draw each group's mean: a curve in a band from its seeds' lowest to highest value, a bar with an error bar of one standard deviation.

`

// writeGroupQualityTable writes the accuracy table with a row per seed group.
func writeGroupQualityTable(b *strings.Builder, spec *Spec, groups []*group) {
	lm := groups[0].all[0].cell.Config.IsLanguageModel()
	b.WriteString("## Accuracy\n\n" + qualityHeader(spec, lm, "| group | seeds |"))
	// Accuracy and its spread in percent ("92.00 ± 2.00%"), perplexity as it is.
	qualityMean := func(v float64) string { return fmt.Sprintf("%.2f", 100*v) }
	qualityStd, qualityUnit := qualityMean, "%"
	if lm {
		qualityMean = func(v float64) string { return qualityText(v, true) }
		qualityStd, qualityUnit = func(v float64) string { return fmt.Sprintf("%.2f", v) }, ""
	}
	loss := func(v float64) string { return fmt.Sprintf("%.4f", v) }
	for _, g := range groups {
		if len(g.counted) == 0 {
			fmt.Fprintf(b, "| %s | %s | no seed finished with these settings |\n", g.name, g.seeds())
			continue
		}
		final := func(r result) *float64 {
			if lm {
				return r.sum.Eval.Perplexity
			}
			return r.sum.Eval.Accuracy
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |", g.name, g.seeds(), g.steps(),
			g.figure(final, qualityMean, qualityStd, qualityUnit),
			g.figure(func(r result) *float64 { return r.best }, qualityMean, qualityStd, qualityUnit),
			g.figure(func(r result) *float64 { return r.sum.FinalLoss }, loss, loss, ""))
		if spec.Target > 0 {
			fmt.Fprintf(b, " %s |", g.timeToReach())
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// steps is the steps the counted seeds ran: one number when they agree, else the range.
func (g *group) steps() string {
	lo, hi := g.counted[0].sum.Steps, g.counted[0].sum.Steps
	for _, r := range g.counted {
		lo, hi = min(lo, r.sum.Steps), max(hi, r.sum.Steps)
	}
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

// timeToReach is the mean time to the target when every counted seed reached it. A seed
// that did not has no time to average, and leaving it out would flatter the group, so
// then the row says how many did.
func (g *group) timeToReach() string {
	reached := 0
	for _, r := range g.counted {
		if r.toReach != nil {
			reached++
		}
	}
	switch {
	case reached == 0:
		return fmt.Sprintf("not reached (0/%d)", len(g.counted))
	case reached < len(g.counted):
		return fmt.Sprintf("%d/%d reached", reached, len(g.counted))
	}
	seconds := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	return g.figure(func(r result) *float64 { return r.toReach }, seconds, seconds, " s")
}

// writeGroupSpeedTable writes the speed table with a row per seed group.
func writeGroupSpeedTable(b *strings.Builder, groups []*group) {
	b.WriteString("## Speed and traffic\n\n")
	b.WriteString("| group | seeds | samples/s | vs dense | step ms: total, compute, selection, comm, wait | bytes sent per step | density achieved | tensors missing per step | ranks agree |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	dense := map[string]float64{} // mean samples/s of the dense group of each setting
	for _, g := range groups {
		if len(g.counted) > 0 && g.pipeline() == "dense" {
			dense[g.setting] = g.meanResult().sum.Throughput.SamplesPerS
		}
	}
	oneDecimal := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	for _, g := range groups {
		if len(g.counted) == 0 {
			fmt.Fprintf(b, "| %s | %s | no seed finished with these settings |\n", g.name, g.seeds())
			continue
		}
		m := g.meanResult().sum
		speedup := "-"
		if d := dense[g.setting]; d > 0 && m.Throughput.SamplesPerS > 0 {
			speedup = fmt.Sprintf("%.2fx", m.Throughput.SamplesPerS/d)
		}
		t := m.Throughput.StepMS
		mean := func(f func(result) *float64) *float64 {
			if s := g.over(f); s.n > 0 {
				return &s.mean
			}
			return nil
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %.1f, %.1f, %.1f, %.1f, %.1f | %s | %s | %s | %s |\n",
			g.name, g.seeds(),
			g.figure(func(r result) *float64 { return &r.sum.Throughput.SamplesPerS }, oneDecimal, oneDecimal, ""),
			speedup, t.Total, t.Compute, t.Sparsify, t.Comm, t.Wait,
			bytesText(mean(func(r result) *float64 { return r.sum.Traffic.BytesSentPerStep })),
			opt(mean(func(r result) *float64 { return r.sum.Sparsity.DensityAchieved }), "%.4f"),
			opt(mean(func(r result) *float64 { return r.sum.Sparsity.TensorsMissingPerStep }), "%.1f"),
			g.agree())
	}
	b.WriteString("\nSamples/s is the mean ± the standard deviation over the seeds, the other columns the means. Steps overlap computation and communication, so the parts of a step can add up to more than its total.\n\n")
}

// writeGroupExtras writes the pipeline-specific figures the groups' cells report (such as
// SAFusion's allgather time or ExDyna's index bytes), each group's mean with its 95%
// interval; nothing when no cell reports one.
func writeGroupExtras(b *strings.Builder, groups []*group) {
	keys := extraKeys(groups)
	if len(keys) == 0 {
		return
	}
	b.WriteString("## Pipeline-specific figures\n\nEach figure a pipeline reports beyond the common ones, averaged over each run's steps: the mean over the seeds with its 95% confidence interval.\n\n")
	b.WriteString("| group | seeds | " + strings.Join(keys, " | ") + " |\n|---|---|" + strings.Repeat("---|", len(keys)) + "\n")
	for _, g := range groups {
		cells := make([]string, len(keys))
		reported := false
		for i, k := range keys {
			s := newSample(g.values(func(r result) *float64 {
				if v, ok := r.sum.Extra[k]; ok {
					return &v
				}
				return nil
			}))
			cells[i] = s.interval("")
			reported = reported || len(s.xs) > 0
		}
		if reported {
			fmt.Fprintf(b, "| %s | %s | %s |\n", g.name, g.seeds(), strings.Join(cells, " | "))
		}
	}
	b.WriteString("\n")
}

// extraKeys lists, sorted, the pipeline-specific figures (Summary.Extra) the groups' counted
// seeds report.
func extraKeys(groups []*group) []string {
	var keys []string
	for _, g := range groups {
		for _, r := range g.counted {
			for k := range r.sum.Extra {
				if !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// agree says whether the ranks agreed in every counted seed that checked.
func (g *group) agree() string {
	var checked *bool
	for _, r := range g.counted {
		if v := r.sum.Consistency.ParamChecksumEqual; v != nil {
			all := *v && (checked == nil || *checked)
			checked = &all
		}
	}
	return agree(checked)
}

// groupsCSV is every seed group's figures as a table for other tools (the quoted figures of
// the documentation among them): per figure the mean over the counted seeds, and for
// accuracy and throughput the ends of the mean's 95% interval too. A figure no seed has is
// empty.
func groupsCSV(groups []*group) []byte {
	extras := extraKeys(groups)
	figures := []struct {
		name     string
		interval bool
		of       func(result) *float64
	}{
		{"accuracy", true, func(r result) *float64 { return scaled(r.sum.Eval.Accuracy, 100) }},
		{"perplexity", false, func(r result) *float64 { return r.sum.Eval.Perplexity }},
		{"best", false, func(r result) *float64 { return r.best }},
		{"final_loss", false, func(r result) *float64 { return r.sum.FinalLoss }},
		{"samples_per_s", true, func(r result) *float64 { return &r.sum.Throughput.SamplesPerS }},
		{"step_ms", false, func(r result) *float64 { return &r.sum.Throughput.StepMS.Total }},
		{"compute_ms", false, func(r result) *float64 { return &r.sum.Throughput.StepMS.Compute }},
		{"selection_ms", false, func(r result) *float64 { return &r.sum.Throughput.StepMS.Sparsify }},
		{"comm_ms", false, func(r result) *float64 { return &r.sum.Throughput.StepMS.Comm }},
		{"wait_ms", false, func(r result) *float64 { return &r.sum.Throughput.StepMS.Wait }},
		{"bytes_sent_per_step", false, func(r result) *float64 { return r.sum.Traffic.BytesSentPerStep }},
		{"density_achieved", false, func(r result) *float64 { return r.sum.Sparsity.DensityAchieved }},
		{"tensors_missing_per_step", false, func(r result) *float64 { return r.sum.Sparsity.TensorsMissingPerStep }},
		{"partition_imbalance", false, func(r result) *float64 { return r.sum.Sparsity.PartitionImbalance }},
	}
	for _, k := range extras {
		figures = append(figures, struct {
			name     string
			interval bool
			of       func(result) *float64
		}{k, false, func(r result) *float64 {
			if v, ok := r.sum.Extra[k]; ok {
				return &v
			}
			return nil
		}})
	}
	header := []string{"group", "pipeline", "seeds"}
	for _, f := range figures {
		header = append(header, f.name)
		if f.interval {
			header = append(header, f.name+"_ci_low", f.name+"_ci_high")
		}
	}
	var b strings.Builder
	w := csv.NewWriter(&b)
	w.Write(header)
	num := func(v float64) string {
		if math.IsNaN(v) {
			return ""
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	for _, g := range groups {
		rec := []string{g.name, g.pipeline(), strconv.Itoa(len(g.counted))}
		for _, f := range figures {
			s := newSample(g.values(f.of))
			rec = append(rec, num(s.mean))
			if f.interval {
				rec = append(rec, num(s.mean-s.half), num(s.mean+s.half))
			}
		}
		w.Write(rec)
	}
	w.Flush()
	return []byte(b.String())
}

// scaled is v times k, or nil.
func scaled(v *float64, k float64) *float64 {
	if v == nil {
		return nil
	}
	return ptr(k * *v)
}
