package sim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ssfusion/ssfusion/internal/atomicfile"
	"github.com/ssfusion/ssfusion/plots"
)

// Report is what a simulate command writes: the sweep's points, the setting they were
// simulated in, and the validation against measured runs when there is one.
type Report struct {
	Setting map[string]string `json:"setting"` // flag values, for the record
	// Revision is the source revision of the program that simulated, "" when unknown.
	Revision   string      `json:"revision,omitempty"`
	Points     []Point     `json:"points"`
	Validation *Validation `json:"validation,omitempty"`
}

// Write writes dir/simulation.json, dir/results.csv, dir/report.md and the plots.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the simulation: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, "simulation.json"), append(js, '\n')); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, "results.csv"), []byte(pointsCSV(r.Points))); err != nil {
		return err
	}
	figures, err := r.plot(dir)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, "report.md"), []byte(r.markdown(figures)))
}

// group is the points of one model on one network.
type group struct {
	model, network string
	points         []Point
}

func (r *Report) groups() []group {
	var gs []group
	for _, p := range r.Points {
		if n := len(gs); n > 0 && gs[n-1].model == p.Model && gs[n-1].network == p.Network {
			gs[n-1].points = append(gs[n-1].points, p)
			continue
		}
		gs = append(gs, group{model: p.Model, network: p.Network, points: []Point{p}})
	}
	return gs
}

func (g group) pipelines() []string {
	var names []string
	for _, p := range g.points {
		if !slices.Contains(names, p.Pipeline) {
			names = append(names, p.Pipeline)
		}
	}
	return names
}

func (g group) workers() []int {
	var ws []int
	for _, p := range g.points {
		if !slices.Contains(ws, p.Workers) {
			ws = append(ws, p.Workers)
		}
	}
	slices.Sort(ws)
	return ws
}

func (g group) point(pipeline string, workers int) (Point, bool) {
	for _, p := range g.points {
		if p.Pipeline == pipeline && p.Workers == workers {
			return p, true
		}
	}
	return Point{}, false
}

func (g group) slug() string { return slugify(g.model + "-" + g.network) }

func slugify(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '-'
	}, s)
}

// plot draws, per group, throughput and efficiency against workers and the breakdown at
// the largest scale; it returns the files by group slug.
func (r *Report) plot(dir string) (map[string][]string, error) {
	figures := make(map[string][]string)
	for _, g := range r.groups() {
		var tput, eff []plots.Series
		var stacks []plots.Stack
		ws := g.workers()
		for _, name := range g.pipelines() {
			t, e := plots.Series{Name: name}, plots.Series{Name: name}
			for _, w := range ws {
				if p, ok := g.point(name, w); ok {
					t.X, t.Y = append(t.X, float64(w)), append(t.Y, p.SamplesPerS)
					e.X, e.Y = append(e.X, float64(w)), append(e.Y, 100*p.Efficiency)
				}
			}
			tput, eff = append(tput, t), append(eff, e)
			if p, ok := g.point(name, ws[len(ws)-1]); ok {
				stacks = append(stacks, plots.Stack{Label: name, Parts: []float64{p.ComputeMS, p.SelectionMS, p.ExposedCommMS}})
			}
		}
		title := fmt.Sprintf("%s, %s", g.model, g.network)
		files := []string{g.slug() + "-throughput.png", g.slug() + "-efficiency.png", g.slug() + "-breakdown.png"}
		if err := plots.Lines(filepath.Join(dir, files[0]), title+": predicted throughput", "workers", "samples/s", tput, true); err != nil {
			return nil, err
		}
		if err := plots.Lines(filepath.Join(dir, files[1]), title+": scaling efficiency", "workers", "% of linear scaling", eff, true); err != nil {
			return nil, err
		}
		if err := plots.StackedBars(filepath.Join(dir, files[2]), fmt.Sprintf("%s: step at %d workers", title, ws[len(ws)-1]), "ms per step",
			[]string{"compute", "selection in backward", "waiting: communication, off-path selection"}, stacks); err != nil {
			return nil, err
		}
		figures[g.slug()] = files
	}
	return figures, nil
}

// markdown is report.md.
func (r *Report) markdown(figures map[string][]string) string {
	var b strings.Builder
	b.WriteString("# Scale simulation\n\n")
	b.WriteString("Predicted by running each pipeline's code on a virtual clock: compute replayed from the profile, selections timed by the selection model, collectives by the network model (see `go run . simulate --help`).\n\n")
	fmt.Fprintf(&b, "Simulated at revision %s.\n\n", cmp.Or(r.Revision, "unknown"))
	if len(r.Setting) > 0 {
		keys := make([]string, 0, len(r.Setting))
		for k := range r.Setting {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "- %s: %s\n", k, r.Setting[k])
		}
		b.WriteString("\n")
	}
	if r.Validation != nil {
		b.WriteString(r.Validation.Markdown())
	}
	for _, g := range r.groups() {
		ws := g.workers()
		fmt.Fprintf(&b, "## %s, %s\n\n", g.model, g.network)
		for _, f := range figures[g.slug()] {
			fmt.Fprintf(&b, "![%s](%s)\n", f, f)
		}
		b.WriteString("\nSamples/s (scaling efficiency):\n\n| pipeline |")
		for _, w := range ws {
			fmt.Fprintf(&b, " %d |", w)
		}
		b.WriteString("\n|---|" + strings.Repeat("---|", len(ws)) + "\n")
		for _, name := range g.pipelines() {
			fmt.Fprintf(&b, "| %s |", name)
			for _, w := range ws {
				if p, ok := g.point(name, w); ok {
					fmt.Fprintf(&b, " %.0f (%.0f%%) |", p.SamplesPerS, 100*p.Efficiency)
				} else {
					b.WriteString(" - |")
				}
			}
			b.WriteString("\n")
		}
		last := ws[len(ws)-1]
		fmt.Fprintf(&b, "\nStep at %d workers (ms):\n\n| pipeline | iteration | compute | selection in backward | selection (all) | waiting: comm, off-path selection | MB sent/step | density |\n|---|---|---|---|---|---|---|---|\n", last)
		for _, name := range g.pipelines() {
			if p, ok := g.point(name, last); ok {
				density := "-"
				if p.Density > 0 {
					density = fmt.Sprintf("%.4f", p.Density)
				}
				fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %s |\n", name, p.IterationMS, p.ComputeMS,
					p.SelectionMS, p.SelectionTotalMS, p.ExposedCommMS, p.BytesPerStep/1e6, density)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// pointsCSV is results.csv: one row per point.
func pointsCSV(points []Point) string {
	var b strings.Builder
	b.WriteString("model,network,pipeline,workers,iteration_ms,samples_per_s,efficiency,compute_ms,selection_ms,selection_total_ms,exposed_comm_ms,comm_ms,bytes_per_step,density,tensors_missing\n")
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	for _, p := range points {
		fields := []string{p.Model, p.Network, p.Pipeline, strconv.Itoa(p.Workers), f(p.IterationMS), f(p.SamplesPerS), f(p.Efficiency),
			f(p.ComputeMS), f(p.SelectionMS), f(p.SelectionTotalMS), f(p.ExposedCommMS), f(p.CommMS), f(p.BytesPerStep), f(p.Density), f(p.TensorsMissing)}
		b.WriteString(strings.Join(fields, ",") + "\n")
	}
	return b.String()
}

// Summary is a short table of the points for the terminal: samples/s per pipeline at each
// scale, one block per model and network.
func Summary(points []Point) string {
	r := Report{Points: points}
	var b strings.Builder
	for _, g := range r.groups() {
		ws := g.workers()
		fmt.Fprintf(&b, "%s, %s: predicted samples/s\n%-14s", g.model, g.network, "workers")
		for _, w := range ws {
			fmt.Fprintf(&b, "%9d", w)
		}
		b.WriteString("\n")
		for _, name := range g.pipelines() {
			fmt.Fprintf(&b, "%-14s", name)
			for _, w := range ws {
				p, _ := g.point(name, w)
				fmt.Fprintf(&b, "%9.0f", p.SamplesPerS)
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	return b.String()
}
