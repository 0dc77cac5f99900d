package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ssfusion/ssfusion/internal/progress"
	"github.com/ssfusion/ssfusion/internal/provenance"
	"github.com/ssfusion/ssfusion/nets"
	"github.com/ssfusion/ssfusion/sim"
)

// runMap runs the map that --vary asks for: every pipeline at every point of a grid over
// one or two constants, going on from the points a map of the same setting left in --out.
func runMap(cmd *cobra.Command, f *simulateFlags) error {
	m, report, err := buildMap(f)
	if err != nil {
		return usage(err)
	}
	if m.Base.MemoryLimit > 0 {
		debug.SetMemoryLimit(sim.HeapLimit(m.Base.MemoryLimit, m.Base.Profiles))
	}
	var done []sim.MapPoint
	old, err := sim.LoadMapReport(f.out)
	if err != nil {
		return err
	}
	if old != nil {
		if err := old.Continues(report.Setting, report.X, report.Y); err != nil {
			return fmt.Errorf("--out %s: %w; give another --out or delete %s", f.out, err, filepath.Join(f.out, sim.MapFile))
		}
		done = old.Points
		fmt.Fprintf(cmd.ErrOrStderr(), "simulate: going on from %d points in %s\n", len(done), filepath.Join(f.out, sim.MapFile))
	}
	bar := progress.NewJobBar(os.Stderr, m.Missing(done), "map point")
	m.Progress = bar.Progress
	points, err := m.Run(cmd.Context(), done, func(so []sim.MapPoint) error {
		report.Points = so
		return report.Save(f.out)
	})
	bar.Finish()
	if err != nil {
		return err
	}
	report.Points = points
	if err := report.Write(f.out); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "report: %s\n", filepath.Join(f.out, "report.md"))
	return nil
}

// buildMap checks the flags of a map and returns it with its report, still without
// points.
func buildMap(f *simulateFlags) (*sim.Map, *sim.MapReport, error) {
	if len(f.vary) > 2 {
		return nil, nil, fmt.Errorf("--vary: a map varies one or two constants, got %d", len(f.vary))
	}
	if !(f.modelError >= 0) || math.IsInf(f.modelError, 0) {
		return nil, nil, fmt.Errorf("--model-error must be a fraction of at least 0, got %g", f.modelError)
	}
	var axes [2]sim.Axis
	for i, v := range f.vary {
		a, err := sim.ParseAxis(v)
		if err != nil {
			return nil, nil, fmt.Errorf("--vary %w", err)
		}
		axes[i] = a
	}
	var named []sim.NamedSetting
	if f.named {
		named = sim.NamedSettings()
	}
	m, err := f.sweep.Map(axes[0], axes[1], named)
	if err != nil {
		return nil, nil, err
	}
	m.Revision = provenance.Collect(nets.GEMMKernel()).RevisionText()
	setting := f.sweep.Setting(nil)
	setting["network"] = m.Network.String()
	setting["constants"] = fmt.Sprintf("%d workers, %s, start-up %v, top-k %.4gns a call and %.4gns an element", m.Constants.Workers,
		sim.FormatBandwidth(m.Constants.BitsPerSecond), m.Constants.Latency, m.Constants.SelectCallNS, m.Constants.SelectElementNS)
	setting["pipelines"] = strings.Join(m.Base.Pipelines, ", ")
	setting["profiles"] = strings.Join(f.sweep.Profiles, ", ")
	var comparisons []sim.Comparison
	for _, c := range f.compare {
		cmp, err := sim.ParseComparison(c)
		if err != nil {
			return nil, nil, fmt.Errorf("--compare %w", err)
		}
		for _, p := range cmp.Against {
			if !slices.Contains(m.Base.Pipelines, p) {
				return nil, nil, fmt.Errorf("--compare %s: %s is not among the pipelines simulated (%s)", cmp.Name, p, strings.Join(m.Base.Pipelines, ","))
			}
		}
		comparisons = append(comparisons, cmp)
	}
	command := "go run . " + strings.Join(os.Args[1:], " ")
	return m, &sim.MapReport{Command: command, Setting: setting, Comparisons: comparisons, X: axes[0], Y: axes[1], ModelError: f.modelError}, nil
}
