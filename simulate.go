package main

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/ssfusion/ssfusion/experiments"
	"github.com/ssfusion/ssfusion/pipelines"
	"github.com/ssfusion/ssfusion/profile"
	"github.com/ssfusion/ssfusion/sim"
	"github.com/ssfusion/ssfusion/sim/validate"
)

// simulateFlags are the simulate command's settings.
type simulateFlags struct {
	profiles, pipelines, bandwidths []string
	pipelinesSet                    bool     // --pipelines given, if empty
	optionsSet                      []string // the pipeline options given
	workers                         []int
	latency                         time.Duration
	allreduce                       string
	perNode                         int
	intraBandwidth                  string
	intraLatency                    time.Duration
	settings                        pipelines.Settings // the pipelines' options
	speed                           float64
	selection                       string
	selectionSpeed                  float64
	steps, warmup                   int
	out                             string
	validate                        bool
	validation                      string
	tolerance                       float64
	parallel                        int
	memory                          string
}

func newSimulateCommand() *cobra.Command {
	var f simulateFlags
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Predict every pipeline's throughput at 8 to 256 workers on cluster networks",
		Long: `Run each pipeline's own code on a virtual clock at the scales and on the networks
given, and write predicted iteration time, samples/s, scaling efficiency and the step's
breakdown (compute, selection in backward, waiting for communication and off-path
selection) to --out: report.md,
results.csv, simulation.json and PNG plots.

A simulated step replays the model's compute from a profile (--profile: a shipped model,
` + strings.Join(profile.Architectures(), ", ") + `, or a JSON file such as one written by
train --profile-out), pushes synthetic gradients into the pipeline as backprop would, and
times selections with a selection model and collectives with an alpha-beta network model.
One rank stands for all: the ranks are taken to be identical, so memory is that of one rank.

--selection picks the selection model: cpu (the default) is fitted to this project's
selectors on this machine; gpu is a V100 running the papers' PyTorch selectors, built from
published figures, where every selection pays tens of microseconds of kernel launches and
host waits whatever its size. --selection-speed divides either's times.

At 10 and 56 Gbit/s, unless --latency is given, the network uses the constants found in
SAFusion's code; other bandwidths take beta = 8/bandwidth and alpha = --latency (default
50µs). --gpus-per-node > 1 makes collectives hierarchical over a faster link inside each
node. SSFusion and SAFusion plan with the simulated network itself (--allreduce and
--gpus-per-node included), not with train's --cost-alpha and --cost-beta.

Unless --validate=false, the simulator first checks itself against runs measured on this
machine (experiments/validation.yaml: every pipeline at 2 and 4 workers over emulated links,
trained once and kept in --out/validation), and the report opens with the table of predicted
against measured step times. The validation runs select on this machine's CPU, so they are
predicted with the CPU model as fitted here, whatever --selection and --selection-speed the
sweep uses.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			f.pipelinesSet = cmd.Flags().Changed("pipelines")
			for _, key := range pipelines.Keys() {
				if cmd.Flags().Changed(key) {
					f.optionsSet = append(f.optionsSet, key)
				}
			}
			if f.settings, err = pipelines.FromFlags(cmd.Flags(), pipelines.DefaultSettings()); err != nil {
				return usage(err)
			}
			return runSimulate(cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.profiles, "profile", []string{"resnet50", "bert-base"}, "model profiles: shipped names or JSON files")
	fl.StringSliceVar(&f.pipelines, "pipelines", nil, "pipelines to simulate (default: every registered one but the ablations, "+strings.Join(pipelines.Compared(), ",")+")")
	// The planners plan with the simulated network and price selection by the selection
	// model, so the keys that set those in training have no flags here.
	pipelines.AddOptionFlags(fl, pipelines.DefaultSettings(), "cost-alpha", "cost-beta", "select-ns")
	fl.IntSliceVar(&f.workers, "workers", []int{8, 16, 32, 64, 128, 256}, "worker counts")
	fl.StringSliceVar(&f.bandwidths, "bandwidth", []string{"10Gbit", "100Gbit"}, "link bandwidths between nodes, e.g. 10Gbit,100Gbit")
	fl.DurationVar(&f.latency, "latency", 0, "per-message start-up time alpha (0: the 10/56 Gbit constants, else 50µs)")
	fl.StringVar(&f.allreduce, "allreduce", "ring", "allreduce algorithm: ring, tree, rd, ours or auto")
	fl.IntVar(&f.perNode, "gpus-per-node", 1, "ranks per node; above 1, collectives are hierarchical")
	fl.StringVar(&f.intraBandwidth, "intra-bandwidth", "300Gbit", "link bandwidth inside a node (with --gpus-per-node > 1)")
	fl.DurationVar(&f.intraLatency, "intra-latency", 10*time.Microsecond, "per-message start-up time inside a node")
	fl.Float64Var(&f.speed, "speed", 1, "compute speed factor: the profile's times are divided by it")
	fl.StringVar(&f.selection, "selection", "cpu", "selection-time model: "+strings.Join(sim.SelectionModelNames(), " or "))
	fl.Float64Var(&f.selectionSpeed, "selection-speed", 1, "selection speed factor: the selection model's times are divided by it")
	fl.IntVar(&f.steps, "steps", sim.DefaultSteps, "steps simulated per job")
	fl.IntVar(&f.warmup, "warmup", sim.DefaultWarmup, "first steps left out of the averages (0: the default, or all steps but the last)")
	fl.IntVar(&f.parallel, "jobs", runtime.NumCPU(), "simulations run at most at once (each holds one rank's gradients and buffers)")
	fl.StringVar(&f.memory, "memory", "2GB", "memory the simulations may hold together, e.g. 2GB or 512MB; jobs wait for room (0: no limit)")
	fl.StringVar(&f.out, "out", filepath.Join("results", "simulate"), "folder for the report, tables and plots")
	fl.BoolVar(&f.validate, "validate", true, "check the simulator against runs measured on this machine first")
	fl.StringVar(&f.validation, "validation", filepath.Join("experiments", "validation.yaml"), "experiment whose runs the validation measures")
	fl.Float64Var(&f.tolerance, "tolerance", 0.15, "validation: largest relative error of a prediction accepted")
	return cmd
}

func runSimulate(cmd *cobra.Command, f *simulateFlags) error {
	// Until the work starts, what fails is the command line: usage errors.
	sweep, memory, err := f.sweep()
	if err != nil {
		return usage(err)
	}
	if memory > 0 {
		debug.SetMemoryLimit(sim.HeapLimit(memory, sweep.Profiles))
	}
	// A bad setting (an unknown pipeline, --density 2, an option a pipeline refuses)
	// fails now rather than after the validation trainings. Of the pipelines simulated by
	// default, one that cannot run on the profiles (PowerSGD needs the tensors' shapes,
	// which older profiles lack) is left out, and said so, unless it reads an option
	// the user gave.
	if err := sweep.CheckSettings(); err != nil {
		return usage(err)
	}
	if f.pipelinesSet {
		if err := sweep.Try(); err != nil {
			return usage(err)
		}
	} else {
		var kept []string
		for _, name := range sweep.Pipelines {
			if err := sweep.TryPipeline(name); err != nil {
				if readsAny(name, f.optionsSet) {
					return usage(err) // it fails with what the user asked of it
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "simulate: leaving out %v (name it in --pipelines to make this an error)\n", err)
				continue
			}
			kept = append(kept, name)
		}
		if len(kept) == 0 {
			return usage(errors.New("no pipeline can run on these profiles and settings"))
		}
		sweep.Pipelines = kept
	}
	_, described, _ := sim.NamedSelectionModel(f.selection)
	report := &sim.Report{Setting: simSetting(f, sweep.Networks, described)}
	if f.validate {
		// The validation predicts runs measured here, whose selections ran on this
		// machine's CPU, so it checks the simulator's machinery with the CPU model as
		// fitted here, whichever model (and speed) the sweep uses.
		v, err := validateSimulator(cmd, f, sim.DefaultSelectionModel())
		if err != nil {
			return err
		}
		report.Validation = v
	}
	bar := newJobBar(sweep.Jobs(), "simulation")
	sweep.Progress = bar.progress
	points, err := sweep.Run(cmd.Context())
	bar.finish()
	if err != nil {
		return err
	}
	report.Points = points
	if err := report.Write(f.out); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s", sim.Summary(points))
	fmt.Fprintf(cmd.OutOrStdout(), "report: %s\n", filepath.Join(f.out, "report.md"))
	if report.Validation != nil {
		if err := report.Validation.Check(); err != nil {
			return err
		}
	}
	return nil
}

// sweep builds the sweep the flags describe, and the memory its jobs may hold together
// (0: no limit).
func (f *simulateFlags) sweep() (*sim.Sweep, int64, error) {
	profiles, err := sim.LoadProfiles(f.profiles, f.speed)
	if err != nil {
		return nil, 0, fmt.Errorf("--profile, --speed: %w", err)
	}
	nets, err := sim.Networks{Bandwidths: f.bandwidths, Latency: f.latency, AllReduce: f.allreduce, PerNode: f.perNode,
		IntraBandwidth: f.intraBandwidth, IntraLatency: f.intraLatency}.Build()
	if err != nil {
		return nil, 0, fmt.Errorf("network flags: %w", err)
	}
	names := f.pipelines
	if !f.pipelinesSet {
		names = pipelines.Compared()
	}
	// Each pipeline takes the options it reads; an option none of them reads is a
	// mistake.
	for _, key := range f.optionsSet {
		if !slices.ContainsFunc(names, func(n string) bool { s, err := pipelines.Lookup(n); return err != nil || s.ReadsKey(key) }) {
			return nil, 0, fmt.Errorf("--%s: none of the pipelines simulated (%s) reads it", key, strings.Join(names, ", "))
		}
	}
	if len(profiles) == 0 || len(nets) == 0 || len(names) == 0 || len(f.workers) == 0 {
		return nil, 0, errors.New("nothing to simulate: --profile, --bandwidth, --pipelines and --workers each need a value")
	}
	for _, w := range f.workers {
		if w < 1 {
			return nil, 0, fmt.Errorf("--workers: %d is not a worker count", w)
		}
	}
	selection, _, err := sim.NamedSelectionModel(f.selection)
	if err != nil {
		return nil, 0, fmt.Errorf("--selection: %w", err)
	}
	if f.selectionSpeed != 1 {
		if !(f.selectionSpeed > 0) || math.IsInf(f.selectionSpeed, 0) {
			return nil, 0, fmt.Errorf("--selection-speed must be positive and finite, got %g", f.selectionSpeed)
		}
		selection = selection.Scaled(f.selectionSpeed)
	}
	if !(f.tolerance >= 0) {
		return nil, 0, fmt.Errorf("--tolerance must be at least 0, got %g", f.tolerance)
	}
	size, err := humanize.ParseBytes(f.memory)
	if err != nil || size > math.MaxInt64 {
		return nil, 0, fmt.Errorf("--memory %q: want a size such as 2GB or 512MB", f.memory)
	}
	return &sim.Sweep{
		Profiles: profiles, Pipelines: names, Workers: f.workers, Networks: nets, Selection: selection,
		Settings: f.settings, Steps: f.steps, Warmup: f.warmup, Seed: 1, Parallel: f.parallel, MemoryLimit: int64(size),
	}, int64(size), nil
}

// readsAny reports whether pipeline name reads any of keys.
func readsAny(name string, keys []string) bool {
	spec, err := pipelines.Lookup(name)
	return err == nil && slices.ContainsFunc(keys, spec.ReadsKey)
}

func simSetting(f *simulateFlags, nets []sim.Net, selection string) map[string]string {
	s := map[string]string{
		"density":   fmt.Sprint(f.settings.Density),
		"fusion":    fmt.Sprintf("%g MiB", f.settings.FusionMB),
		"selection": selection,
		"selector":  f.settings.Selector,
		"steps":     fmt.Sprintf("%d, of which %d warm-up", f.steps, f.warmup),
		"speed":     fmt.Sprintf("compute x%g, selection x%g", f.speed, f.selectionSpeed),
		"threshold": fmt.Sprintf("select-rule %s, select-threshold %d", f.settings.SelectRule, f.settings.SelectThreshold),
	}
	for _, n := range nets {
		s["network "+n.Name] = n.Model.String()
	}
	return s
}

// validateSimulator trains the validation experiment's cells (once: finished cells are
// kept), then predicts each from the profile it measured.
func validateSimulator(cmd *cobra.Command, f *simulateFlags, selection sim.SelectionModel) (*sim.Validation, error) {
	spec, err := experiments.Load(f.validation)
	if err != nil {
		return nil, err
	}
	results := f.out
	cells, err := spec.Expand(results)
	if err != nil {
		return nil, fmt.Errorf("experiment %s: %w", f.validation, err)
	}
	if err := preflight(f.validation, cells); err != nil {
		return nil, err
	}
	v := &validate.Validator{Selection: selection, Tolerance: f.tolerance}
	v.Train = func(cells []experiments.Cell, force bool) error {
		show := newCellDisplay()
		if force {
			show.logf("validation: measuring %d runs again, whose predictions missed by more than %.0f%%", len(cells), 100*f.tolerance)
		} else {
			show.logf("validation: measuring %d runs of %s (kept in %s for later runs)", len(cells), f.validation, filepath.Join(results, spec.Name))
		}
		r := experiments.Runner{Train: show.train, Progress: show.progress, Force: force}
		_, err := r.Run(cmd.Context(), cells)
		return err
	}
	return v.Validate(cmd.Context(), cells)
}
