package sim

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipelines"
	"github.com/ssfusion/ssfusion/profile"
	"golang.org/x/sync/errgroup"
)

// Net is a network a sweep runs on, under the name its results carry ("10Gbit").
type Net struct {
	Name  string
	Model netmodel.Network
}

// Sweep simulates every pipeline at every scale on every network, for every profile.
type Sweep struct {
	Profiles  []*profile.Profile
	Pipelines []string
	Workers   []int
	Networks  []Net
	Selection SelectionModel
	// Settings are the pipelines' options, given to each pipeline for the keys it reads
	// (see pipelines.Settings.For). The planners plan with each network itself, and with
	// the selection model's cost per element; Settings.Density also scales the synthetic
	// gradients (see Gradients).
	Settings      pipelines.Settings
	Steps, Warmup int
	Seed          uint64
	// Parallel is how many jobs run at most at once (at least one). Each holds one rank's
	// gradients, residuals and buffers.
	Parallel int
	// MemoryLimit, if positive, bounds in bytes what the running jobs hold together, as
	// JobMemory estimates it: a job starts when it fits beside the running ones (or runs
	// alone when it does not fit at all).
	MemoryLimit int64
	// Progress, if set, is told after each job ends; calls do not overlap.
	Progress func(done, total int, job string)
}

// Point is one job of a sweep and its prediction.
type Point struct {
	Model    string `json:"model"`
	Network  string `json:"network"`
	Pipeline string `json:"pipeline"`
	Result
	// Efficiency is the scaling efficiency: compute alone over the iteration, which is
	// samples/s over Workers times a lone worker's samples/s.
	Efficiency float64 `json:"efficiency"`
}

// Jobs is the number of jobs the sweep runs.
func (s *Sweep) Jobs() int {
	return len(s.Profiles) * len(s.Networks) * len(s.Pipelines) * len(s.Workers)
}

// sweepJob is one job of a sweep and the names its point carries.
type sweepJob struct {
	model, net, pipe string
	job              Job
	grads            *sharedGradients // its profile's, made when first needed
}

func (j *sweepJob) label() string {
	return fmt.Sprintf("%s, %s, %s, %d workers", j.model, j.net, j.pipe, j.job.Workers)
}

// Run simulates every combination, one rank standing for all, and returns the points in
// the order profile, network, pipeline, workers. Up to Parallel jobs run at once.
// Cancelling ctx stops the running jobs at their next step and starts no more.
func (s *Sweep) Run(ctx context.Context) ([]Point, error) {
	mem := newBudget(s.MemoryLimit)
	jobs, err := s.plan(mem)
	if err != nil {
		return nil, err
	}
	points := make([]Point, len(jobs))
	// The first job to fail cancels the others' context, so that they stop rather than run
	// to the end of a sweep that has already failed; cancelling ctx stops them all.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, s.Parallel))
	var (
		mu   sync.Mutex // guards done and the progress calls
		done int
	)
	for i := range jobs {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			j := &jobs[i]
			j.job.Gradients = j.grads.get()
			need := JobMemory(j.job.Profile)
			mem.take(need, true)
			res, err := Simulate(gctx, j.job)
			j.job.Gradients = nil
			mem.give(need, true)
			j.grads.done()
			if err != nil {
				return fmt.Errorf("simulating %s: %w", j.label(), err)
			}
			points[i] = newPoint(j.model, j.net, j.pipe, res)
			mu.Lock()
			defer mu.Unlock()
			done++
			if s.Progress != nil {
				s.Progress(done, len(jobs), j.label())
			}
			return nil
		})
	}
	err = g.Wait()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, ctxErr
	}
	if err != nil {
		return nil, err
	}
	return points, nil
}

// plan builds the sweep's jobs, checking every network and getting every pipeline's
// factory before any runs; the profiles' gradients count in mem while they exist.
func (s *Sweep) plan(mem *budget) ([]sweepJob, error) {
	var jobs []sweepJob
	for _, prof := range s.Profiles {
		grads := &sharedGradients{prof: prof, seed: s.Seed, density: s.Settings.Density, budget: mem}
		for _, net := range s.Networks {
			if err := net.Model.Check(); err != nil {
				return nil, fmt.Errorf("network %s: %w", net.Name, err)
			}
			for _, name := range s.Pipelines {
				factory, err := s.factory(name, net)
				if err != nil {
					return nil, fmt.Errorf("pipeline %s: %w", name, err)
				}
				for _, w := range s.Workers {
					jobs = append(jobs, sweepJob{
						model: prof.Model, net: net.Name, pipe: name,
						job: Job{Profile: prof, Workers: w, Network: net.Model, Selection: s.Selection, Pipeline: factory,
							Steps: s.Steps, Warmup: s.Warmup, Seed: s.Seed, Density: s.Settings.Density},
						grads: grads,
					})
					grads.left++
				}
			}
		}
	}
	return jobs, nil
}

// factory builds pipeline name as training would, except that the planners plan with the
// simulated network itself, so that its algorithms and links mean the same for planning as
// for timing, and price selection by the selection model.
func (s *Sweep) factory(name string, net Net) (Factory, error) {
	set, err := s.Settings.For(name)
	if err != nil {
		return nil, err
	}
	if spec, _ := pipelines.Lookup(name); spec.ReadsKey("select-ns") {
		// A 1M-element tensor's time per element spreads the model's per-call cost
		// (kernel launches, under the GPU model) over a tensor of the size SSFusion
		// sparsifies.
		set.SelectNS = s.Selection.Time(set.Selector, 1<<20).Seconds() * 1e9 / (1 << 20)
	}
	if err := pipelines.Check(set); err != nil {
		return nil, err
	}
	plan := net.Model
	return pipelines.Factory(pipelines.Build{Settings: set, Seed: s.Seed, Network: &plan}), nil
}

// CheckSettings reports the first pipeline of the sweep that refuses its settings.
func (s *Sweep) CheckSettings() error {
	for _, name := range s.Pipelines {
		for _, net := range s.Networks {
			if _, err := s.factory(name, net); err != nil {
				return fmt.Errorf("pipeline %s: %w", name, err)
			}
		}
	}
	return nil
}

// Try builds every pipeline of the sweep for every network and profile, and closes it,
// so that a setting a pipeline refuses is found before hours of simulation.
func (s *Sweep) Try() error {
	for _, name := range s.Pipelines {
		if err := s.TryPipeline(name); err != nil {
			return err
		}
	}
	return nil
}

// TryPipeline is Try for one pipeline. It builds on a toy model of small tensors, one for
// each number of dimensions the profile's tensors have, named after the first tensor that
// has it.
func (s *Sweep) TryPipeline(name string) error {
	for _, prof := range s.Profiles {
		tensors := toyTensors(prof)
		for _, net := range s.Networks {
			if err := s.try(name, net, tensors); err != nil {
				return fmt.Errorf("profile %s: %w", prof.Model, err)
			}
		}
	}
	return nil
}

func (s *Sweep) try(name string, net Net, tensors []pipeline.Tensor) error {
	build, err := s.factory(name, net)
	if err != nil {
		return err
	}
	comm := NewSimRank(2, net.Model, NewVirtualClock(s.Selection.Time))
	defer comm.Close()
	p, err := build(comm, tensors)
	if err != nil {
		return err
	}
	return p.Close()
}

// toyTensors are small tensors standing for prof's, one per number of dimensions, each
// with a shape when the profile records one.
func toyTensors(prof *profile.Profile) []pipeline.Tensor {
	seen := map[int]bool{}
	var out []pipeline.Tensor
	for _, t := range prof.Tensors {
		if seen[t.Dims] {
			continue
		}
		seen[t.Dims] = true
		toy := pipeline.Tensor{ID: len(out), Name: t.Name, Dims: t.Dims, Grad: make([]float32, 64)}
		if t.Shape != nil { // a shape of 4s in as many dimensions, for pipelines that read it
			toy.Shape = slices.Repeat([]int{4}, len(t.Shape))
			toy.Grad = make([]float32, 1<<(2*len(t.Shape)))
		}
		out = append(out, toy)
	}
	return out
}

func newPoint(model, network, pipeline string, res Result) Point {
	p := Point{Model: model, Network: network, Pipeline: pipeline, Result: res}
	if res.IterationMS > 0 {
		p.Efficiency = res.ComputeMS / res.IterationMS
	}
	return p
}
