package main

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/experiments"
	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/profile"
	"github.com/ssfusion/ssfusion/sim"
	"github.com/ssfusion/ssfusion/ssfusion"
	"github.com/ssfusion/ssfusion/trainer"
)

// simulateFlags are the simulate command's settings.
type simulateFlags struct {
	profiles, pipelines, bandwidths []string
	workers                         []int
	latency                         time.Duration
	allreduce                       string
	perNode                         int
	intraBandwidth                  string
	intraLatency                    time.Duration
	density, fusionMB, speed        float64
	selection                       string
	selectionSpeed                  float64
	selector                        string
	selectThreshold                 int
	selectRule                      string
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
		RunE: func(cmd *cobra.Command, _ []string) error { return runSimulate(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.profiles, "profile", []string{"resnet50", "bert-base"}, "model profiles: shipped names or JSON files")
	fl.StringSliceVar(&f.pipelines, "pipelines", []string{"dense", "pertensor", "multitensor", "ssfusion", "safusion", "exdyna"}, "pipelines to simulate")
	fl.IntSliceVar(&f.workers, "workers", []int{8, 16, 32, 64, 128, 256}, "worker counts")
	fl.StringSliceVar(&f.bandwidths, "bandwidth", []string{"10Gbit", "100Gbit"}, "link bandwidths between nodes, e.g. 10Gbit,100Gbit")
	fl.DurationVar(&f.latency, "latency", 0, "per-message start-up time alpha (0: the 10/56 Gbit constants, else 50µs)")
	fl.StringVar(&f.allreduce, "allreduce", "ring", "allreduce algorithm: ring, tree, rd, ours or auto")
	fl.IntVar(&f.perNode, "gpus-per-node", 1, "ranks per node; above 1, collectives are hierarchical")
	fl.StringVar(&f.intraBandwidth, "intra-bandwidth", "300Gbit", "link bandwidth inside a node (with --gpus-per-node > 1)")
	fl.DurationVar(&f.intraLatency, "intra-latency", 10*time.Microsecond, "per-message start-up time inside a node")
	fl.Float64Var(&f.density, "density", 0.01, "fraction of gradient elements the sparsifying pipelines send")
	fl.Float64Var(&f.fusionMB, "fusion-mb", trainer.Defaults().FusionMB, "fusion buffer size in MiB")
	fl.StringVar(&f.selector, "selector", "topk", "selector: "+strings.Join(compress.SelectorNames(), ", "))
	fl.IntVar(&f.selectThreshold, "select-threshold", trainer.Defaults().SelectThreshold, "SSFusion, size rule: tensors of at least this many elements are sparsified")
	fl.StringVar(&f.selectRule, "select-rule", trainer.Defaults().SelectRule, "SSFusion's choice of the tensors to sparsify: size, rank (the authors' code: 2-D parameters dense; needs profiles that record dimensions) or cost (see train --help)")
	fl.Float64Var(&f.speed, "speed", 1, "compute speed factor: the profile's times are divided by it")
	fl.StringVar(&f.selection, "selection", "cpu", "selection-time model: "+strings.Join(selectionModelNames(), " or "))
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
	profiles, err := loadProfiles(f.profiles, f.speed)
	if err != nil {
		return usage(err)
	}
	nets, err := simNetworks(f)
	if err != nil {
		return usage(err)
	}
	if err := checkSelectRule(f.selectRule, profiles); err != nil {
		return usage(err)
	}
	if len(profiles) == 0 || len(nets) == 0 || len(f.pipelines) == 0 || len(f.workers) == 0 {
		return usage(errors.New("nothing to simulate: --profile, --bandwidth, --pipelines and --workers each need a value"))
	}
	for _, w := range f.workers {
		if w < 1 {
			return usage(fmt.Errorf("--workers: %d is not a worker count", w))
		}
	}
	newSelection, ok := selectionModels[f.selection]
	if !ok {
		return usage(fmt.Errorf("--selection %q: want %s", f.selection, strings.Join(selectionModelNames(), " or ")))
	}
	selection := newSelection()
	if f.selectionSpeed != 1 {
		if !(f.selectionSpeed > 0) || math.IsInf(f.selectionSpeed, 0) {
			return usage(fmt.Errorf("--selection-speed must be positive and finite, got %g", f.selectionSpeed))
		}
		selection = selection.Scaled(f.selectionSpeed)
	}
	if !(f.tolerance >= 0) {
		return usage(fmt.Errorf("--tolerance must be at least 0, got %g", f.tolerance))
	}
	size, err := humanize.ParseBytes(f.memory)
	if err != nil || size > math.MaxInt64 {
		return usage(fmt.Errorf("--memory %q: want a size such as 2GB or 512MB", f.memory))
	}
	memory := int64(size)
	if memory > 0 {
		// The runtime collects harder as the heap nears the limit, so that what the
		// jobs no longer need does not add up to more than the budget allows. A job
		// larger than the budget runs alone, and the limit leaves it room, lest the
		// collector run without end.
		limit := memory * 9 / 10 // what is not Go's heap, and the collector's lag, need room too
		for _, p := range profiles {
			if lone := sim.LoneMemory(p); lone > memory {
				limit = max(limit, lone*5/4)
			}
		}
		debug.SetMemoryLimit(limit)
	}
	// Build every pipeline once, on a toy tensor, so that a bad setting (an unknown
	// pipeline, --density 2, an unknown --selector) fails now rather than after the
	// validation trainings.
	for _, net := range nets {
		for _, name := range f.pipelines {
			if err := tryPipeline(f, name, net, selection); err != nil {
				return usage(err)
			}
		}
	}
	report := &sim.Report{Setting: simSetting(f, nets)}
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
	sweep := &sim.Sweep{
		Profiles: profiles, Pipelines: f.pipelines, Workers: f.workers, Networks: nets, Selection: selection,
		Factory: func(name string, net sim.Net) (sim.Factory, error) { return simFactory(f, name, net, selection) },
		Density: f.density, Steps: f.steps, Warmup: f.warmup, Seed: 1, Parallel: f.parallel, MemoryLimit: memory,
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

// checkSelectRule refuses a rule simulate cannot honour: the rank rule reads every
// tensor's dimensions, which profiles measured before they were recorded lack; taking
// those tensors for not 2-D would sparsify every tensor and simulate per-tensor
// sparsification under SSFusion's name.
func checkSelectRule(rule string, profiles []*profile.Profile) error {
	r, err := ssfusion.ParseRule(rule)
	if err != nil {
		return fmt.Errorf("--select-rule: %w", err)
	}
	if r != ssfusion.ByRank {
		return nil
	}
	for _, p := range profiles {
		for _, t := range p.Tensors {
			if t.Dims == 0 {
				return fmt.Errorf("--select-rule rank needs every tensor's dimensions, and tensor %s of profile %s has none: measure the profile again with train --profile-out", t.Name, p.Model)
			}
		}
	}
	return nil
}

// loadProfiles reads each --profile: a shipped name, or a JSON file.
func loadProfiles(names []string, speed float64) ([]*profile.Profile, error) {
	var out []*profile.Profile
	for _, name := range names {
		var p *profile.Profile
		var err error
		if strings.HasSuffix(name, ".json") || strings.ContainsRune(name, os.PathSeparator) {
			p, err = profile.Load(name)
		} else if p, err = profile.Builtin(name); err != nil {
			err = fmt.Errorf("--profile %s: not a shipped model (%s) nor a .json file: %w", name, strings.Join(profile.Architectures(), ", "), err)
		}
		if err != nil {
			return nil, err
		}
		if p, err = p.Scaled(speed); err != nil {
			return nil, fmt.Errorf("--speed: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// simNetworks builds one network per --bandwidth.
func simNetworks(f *simulateFlags) ([]sim.Net, error) {
	alg, err := netmodel.ParseAlgorithm(f.allreduce)
	if err != nil {
		return nil, fmt.Errorf("--allreduce: %w", err)
	}
	var intra netmodel.Link
	if f.perNode > 1 {
		c, err := netmodel.ParseCable(f.intraBandwidth, f.intraLatency.String())
		switch {
		case err != nil:
			return nil, fmt.Errorf("--intra-bandwidth, --intra-latency: %w", err)
		case !c.Shaped():
			return nil, fmt.Errorf("--intra-bandwidth %q: want a positive rate such as 300Gbit", f.intraBandwidth)
		}
		intra = c.Link()
	}
	var nets []sim.Net
	for _, b := range f.bandwidths {
		c, err := netmodel.ParseCable(b, f.latency.String())
		switch {
		case err != nil:
			return nil, fmt.Errorf("--bandwidth, --latency: %w", err)
		case !c.Shaped():
			return nil, fmt.Errorf("--bandwidth %q: want a positive rate such as 10Gbit", b)
		}
		inter, preset := netmodel.NetworkPreset(c.BitsPerSecond)
		if !preset || c.Latency > 0 {
			if c.Latency == 0 {
				c.Latency = 50 * time.Microsecond
			}
			inter = c.Link()
		}
		n := netmodel.Network{Inter: inter, Intra: intra, PerNode: f.perNode, AllReduceAlg: alg}
		if err := n.Check(); err != nil {
			return nil, fmt.Errorf("network at %s: %w", b, err)
		}
		nets = append(nets, sim.Net{Name: b, Model: n})
	}
	return nets, nil
}

// simFactory builds pipeline name as train would, except that the planners plan with the
// simulated network itself, so that --allreduce, --gpus-per-node and the links mean the
// same for planning as for timing.
func simFactory(f *simulateFlags, name string, net sim.Net, selection sim.SelectionModel) (sim.Factory, error) {
	build, ok := pipelines[name]
	if !ok {
		return nil, fmt.Errorf("unknown pipeline %q", name)
	}
	cfg := trainer.Defaults()
	cfg.Pipeline, cfg.Density, cfg.FusionMB = name, f.density, f.fusionMB
	cfg.Selector, cfg.SelectThreshold, cfg.SelectRule = f.selector, f.selectThreshold, f.selectRule
	// The chooser prices selection per element; a 1M-element tensor's time per element
	// spreads the model's per-call cost (kernel launches, under the GPU model) over a
	// tensor of the size SSFusion sparsifies.
	cfg.SelectNS = selection.Time(f.selector, 1<<20).Seconds() * 1e9 / (1 << 20)
	plan := net.Model
	return func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		return build(&cfg, &plan, comm, tensors)
	}, nil
}

// tryPipeline builds pipeline name for net on a one-tensor model and closes it.
func tryPipeline(f *simulateFlags, name string, net sim.Net, selection sim.SelectionModel) error {
	build, err := simFactory(f, name, net, selection)
	if err != nil {
		return err
	}
	comm := sim.NewSimRank(2, net.Model, sim.NewVirtualClock(selection.Time))
	defer comm.Close()
	p, err := build(comm, []pipeline.Tensor{{ID: 0, Name: "w", Grad: make([]float32, 64)}})
	if err != nil {
		return fmt.Errorf("pipeline %s: %w", name, err)
	}
	return p.Close()
}

// selectionModels are the --selection values: the selection-time models by name.
var selectionModels = map[string]func() sim.SelectionModel{
	"cpu": sim.DefaultSelectionModel,
	"gpu": sim.GPUSelectionModel,
}

// selectionModelDescriptions say in the report what each --selection value stands for.
var selectionModelDescriptions = map[string]string{
	"cpu": "cpu: our selectors on this machine's CPU (sim.DefaultSelectionModel)",
	"gpu": "gpu: the papers' PyTorch selectors on a V100, from published figures and stated estimates (sim.GPUSelectionModel)",
}

func selectionModelNames() []string {
	return slices.Sorted(maps.Keys(selectionModels))
}

func simSetting(f *simulateFlags, nets []sim.Net) map[string]string {
	s := map[string]string{
		"density":   fmt.Sprint(f.density),
		"fusion":    fmt.Sprintf("%g MiB", f.fusionMB),
		"selection": selectionModelDescriptions[f.selection],
		"selector":  f.selector,
		"steps":     fmt.Sprintf("%d, of which %d warm-up", f.steps, f.warmup),
		"speed":     fmt.Sprintf("compute x%g, selection x%g", f.speed, f.selectionSpeed),
		"threshold": fmt.Sprintf("SSFusion sparsifies tensors of at least %d elements", f.selectThreshold),
	}
	switch f.selectRule {
	case "rank":
		s["threshold"] = "SSFusion sparsifies every tensor but the 2-D ones (the authors' rule)"
	case "cost":
		s["threshold"] = "SSFusion sparsifies the tensors its cost model picks, whatever their size"
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
	v := newValidator(selection, f.tolerance)
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

// newValidator is the simulator's validation, building the runs' pipelines as train does,
// planners included; its Train is the caller's to set.
func newValidator(selection sim.SelectionModel, tolerance float64) *sim.Validator {
	return &sim.Validator{Selection: selection, Tolerance: tolerance,
		Build: func(cfg *trainer.Config, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
			build, ok := pipelines[cfg.Pipeline]
			if !ok {
				return nil, fmt.Errorf("unknown pipeline %q", cfg.Pipeline)
			}
			net, err := planningNetwork(cfg)
			if err != nil {
				return nil, err
			}
			return build(cfg, net, comm, tensors)
		},
	}
}

// jobBar shows a sweep's progress: a bar on a terminal, a line per job otherwise.
type jobBar struct {
	bar  *progressbar.ProgressBar
	what string
}

func newJobBar(jobs int, what string) *jobBar {
	b := &jobBar{what: what}
	if term.IsTerminal(int(os.Stderr.Fd())) {
		b.bar = progressbar.NewOptions(jobs, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetItsString("job"),
			progressbar.OptionShowCount(), progressbar.OptionSetElapsedTime(true), progressbar.OptionSetWidth(20),
			progressbar.OptionThrottle(200*time.Millisecond))
	}
	return b
}

func (b *jobBar) progress(done, total int, job string) {
	if b.bar == nil {
		fmt.Fprintf(os.Stderr, "%s %d/%d done: %s\n", b.what, done, total, job)
		return
	}
	b.bar.Set(done)
	b.bar.Describe(job)
}

func (b *jobBar) finish() {
	if b.bar != nil {
		b.bar.Finish()
		fmt.Fprintln(os.Stderr)
	}
}
