package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ssfusion/ssfusion/internal/progress"
	"github.com/ssfusion/ssfusion/internal/provenance"
	"github.com/ssfusion/ssfusion/nets"
	"github.com/ssfusion/ssfusion/pipelines"
	"github.com/ssfusion/ssfusion/profile"
	"github.com/ssfusion/ssfusion/sim"
	"github.com/ssfusion/ssfusion/sim/validate"
)

// simulateFlags are the simulate command's settings: the sweep's, and the validation's.
type simulateFlags struct {
	sweep      sim.Config
	out        string
	validate   bool
	validation string
	vary       []string // a map's axes, NAME=VALUES
	compare    []string // a map's further comparisons, NAME=PIPELINES
	modelError float64
	named      bool
	// validateOnly measures and predicts the validation's runs, and simulates nothing else.
	validateOnly bool
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

--vary makes a map instead: every pipeline at every point of a grid over one or two hardware
constants (workers, bandwidth, latency, select-call, select-element), the rest held at the
flags' values, with SSFusion's gain over the others at each point, the fastest pipeline, and
named clusters whose constants have a source; --compare adds gains over named sets of
pipelines. A map keeps its points in --out/map.json and goes on from them when run again; it
runs no validation, and --model-error stands for the simulator's error instead.
--selection-costs builds the gpu selection model from figures measured on your GPU
(tools/gpu-selection/measure.py). --validate-only checks the simulator and does nothing else.

Unless --validate=false, the simulator first checks itself against runs measured on this
machine (experiments/validation.yaml: every pipeline at 2 and 4 workers over emulated links,
trained once and kept in --out/validation), and the report opens with the table of predicted
against measured step times. The validation runs select on this machine's CPU, so they are
predicted with the CPU model as fitted here, whatever --selection and --selection-speed the
sweep uses.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			f.sweep.PipelinesNamed = cmd.Flags().Changed("pipelines")
			if f.sweep.SelectionCosts != "" && !cmd.Flags().Changed("selection") {
				f.sweep.Selection = "gpu"
			}
			for _, key := range pipelines.Keys() {
				if cmd.Flags().Changed(key) {
					f.sweep.OptionsSet = append(f.sweep.OptionsSet, key)
				}
			}
			if f.sweep.Settings, err = pipelines.FromFlags(cmd.Flags(), pipelines.DefaultSettings()); err != nil {
				return usage(err)
			}
			return runSimulate(cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.sweep.Profiles, "profile", []string{"resnet50", "bert-base"}, "model profiles: shipped names or JSON files")
	fl.StringSliceVar(&f.sweep.Pipelines, "pipelines", nil, "pipelines to simulate (default: every registered one but the ablations, "+strings.Join(pipelines.Compared(), ",")+")")
	// The planners plan with the simulated network and price selection by the selection
	// model, so the keys that set those in training have no flags here.
	pipelines.AddOptionFlags(fl, pipelines.DefaultSettings(), "cost-alpha", "cost-beta", "select-ns")
	fl.IntSliceVar(&f.sweep.Workers, "workers", []int{8, 16, 32, 64, 128, 256}, "worker counts")
	fl.StringSliceVar(&f.sweep.Networks.Bandwidths, "bandwidth", []string{"10Gbit", "100Gbit"}, "link bandwidths between nodes, e.g. 10Gbit,100Gbit")
	fl.DurationVar(&f.sweep.Networks.Latency, "latency", 0, "per-message start-up time alpha (0: the 10/56 Gbit constants, else 50µs)")
	fl.StringVar(&f.sweep.Networks.AllReduce, "allreduce", "ring", "allreduce algorithm: ring, tree, rd, ours or auto")
	fl.IntVar(&f.sweep.Networks.PerNode, "gpus-per-node", 1, "ranks per node; above 1, collectives are hierarchical")
	fl.StringVar(&f.sweep.Networks.IntraBandwidth, "intra-bandwidth", "300Gbit", "link bandwidth inside a node (with --gpus-per-node > 1)")
	fl.DurationVar(&f.sweep.Networks.IntraLatency, "intra-latency", 10*time.Microsecond, "per-message start-up time inside a node")
	fl.Float64Var(&f.sweep.Speed, "speed", 1, "compute speed factor: the profile's times are divided by it")
	fl.StringVar(&f.sweep.Selection, "selection", "cpu", "selection-time model: "+strings.Join(sim.SelectionModelNames(), " or "))
	fl.StringVar(&f.sweep.SelectionCosts, "selection-costs", "", "the gpu selection model at the figures in this JSON file, as tools/gpu-selection/measure.py writes them on a GPU (implies --selection gpu)")
	fl.Float64Var(&f.sweep.SelectionSpeed, "selection-speed", 1, "selection speed factor: the selection model's times are divided by it")
	fl.IntVar(&f.sweep.Steps, "steps", sim.DefaultSteps, "steps simulated per job")
	fl.IntVar(&f.sweep.Warmup, "warmup", sim.DefaultWarmup, "first steps left out of the averages (0: the default, or all steps but the last)")
	fl.IntVar(&f.sweep.Parallel, "jobs", runtime.NumCPU(), "simulations run at most at once (each holds one rank's gradients and buffers)")
	fl.StringVar(&f.sweep.Memory, "memory", "2GB", "memory the simulations may hold together, e.g. 2GB or 512MB; jobs wait for room (0: no limit)")
	fl.StringVar(&f.out, "out", filepath.Join("results", "simulate"), "folder for the report, tables and plots")
	fl.BoolVar(&f.validate, "validate", true, "check the simulator against runs measured on this machine first")
	fl.StringVar(&f.validation, "validation", filepath.Join("experiments", "validation.yaml"), "experiment whose runs the validation measures")
	fl.Float64Var(&f.sweep.Tolerance, "tolerance", 0.15, "validation: largest relative error of a prediction accepted")
	fl.BoolVar(&f.validateOnly, "validate-only", false, "only check the simulator against --validation's runs: no sweep, the report holds the validation alone")
	fl.StringArrayVar(&f.vary, "vary", nil, "map: a constant to sweep, NAME=V1,V2,... or NAME=LO..HI/N (log-spaced); NAME one of "+
		strings.Join(sim.AxisNames(), ", ")+"; give it once or twice")
	fl.StringArrayVar(&f.compare, "compare", nil, "map: also SSFusion's gain over the faster of these pipelines, NAME=PIPELINE,PIPELINE (repeatable; report only, so a finished map can be redrawn with others)")
	fl.Float64Var(&f.modelError, "model-error", 0.15, "map: the simulator's error; a gain inside it is reported as within model error")
	fl.BoolVar(&f.named, "named", true, "map: also simulate the named settings (the SSFusion testbed, common clusters, this machine)")
	return cmd
}

// runSimulate checks the sweep the flags describe, checks the simulator against this
// machine unless --validate=false, runs the sweep and writes its report.
func runSimulate(cmd *cobra.Command, f *simulateFlags) error {
	// Until the work starts, what fails is the command line: usage errors.
	f.sweep.LeftOut = func(err error) {
		fmt.Fprintf(cmd.ErrOrStderr(), "simulate: leaving out %v (name it in --pipelines to make this an error)\n", err)
	}
	if len(f.vary) == 0 {
		for _, name := range []string{"compare", "model-error", "named"} {
			if cmd.Flags().Changed(name) {
				return usage(fmt.Errorf("--%s shapes a map: it goes with --vary", name))
			}
		}
	}
	if f.validateOnly && (!f.validate || len(f.vary) > 0) {
		return usage(fmt.Errorf("--validate-only checks the simulator and simulates nothing else: it goes with neither --validate=false nor --vary"))
	}
	if len(f.vary) > 0 {
		return runMap(cmd, f)
	}
	sweep, err := f.sweep.Sweep()
	if err != nil {
		return usage(err)
	}
	if sweep.MemoryLimit > 0 {
		debug.SetMemoryLimit(sim.HeapLimit(sweep.MemoryLimit, sweep.Profiles))
	}
	report := &sim.Report{Setting: f.sweep.Setting(sweep.Networks), Revision: provenance.Collect(nets.GEMMKernel()).RevisionText()}
	if f.validate {
		show := newCellDisplay()
		report.Validation, err = validate.Run(cmd.Context(), validate.Config{Experiment: f.validation, Results: f.out,
			Tolerance: f.sweep.Tolerance, Train: show.train, Progress: show.progress, Logf: show.logf})
		if err != nil {
			return err
		}
	}
	if f.validateOnly {
		report.Setting = map[string]string{"validation": f.validation, "selection": "cpu (the runs select on this machine's CPU)"}
		if err := report.Write(f.out); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "report: %s\n", filepath.Join(f.out, "report.md"))
		return report.Validation.Check()
	}
	bar := progress.NewJobBar(os.Stderr, sweep.Jobs(), "simulation")
	sweep.Progress = bar.Progress
	points, err := sweep.Run(cmd.Context())
	bar.Finish()
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
		return report.Validation.Check()
	}
	return nil
}
