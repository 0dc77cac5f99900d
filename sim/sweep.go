package sim

import (
	"fmt"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/profile"
)

// Net is a network a sweep runs on, under the name its results carry ("10Gbit").
type Net struct {
	Name  string
	Model dist.Network
}

// Sweep simulates every pipeline at every scale on every network, for every profile.
type Sweep struct {
	Profiles  []*profile.Profile
	Pipelines []string
	Workers   []int
	Networks  []Net
	Selection SelectionModel
	// Factory builds a pipeline by name for a network (SAFusion and SSFusion plan with
	// the network's cost).
	Factory func(pipeline string, net Net) (Factory, error)
	// Density scales the synthetic gradients (see Gradients); the pipelines' own.
	Density       float64
	Steps, Warmup int
	Seed          uint64
	// Progress, if set, is told before each job starts.
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

// Run simulates every combination, one rank standing for all, and returns the points in
// the order profile, network, pipeline, workers.
func (s *Sweep) Run() ([]Point, error) {
	points := make([]Point, 0, s.Jobs())
	for _, prof := range s.Profiles {
		grads := NewGradients(prof, s.Seed, s.Density)
		for _, net := range s.Networks {
			if err := net.Model.Check(); err != nil {
				return nil, fmt.Errorf("network %s: %w", net.Name, err)
			}
			for _, name := range s.Pipelines {
				factory, err := s.Factory(name, net)
				if err != nil {
					return nil, fmt.Errorf("pipeline %s: %w", name, err)
				}
				for _, w := range s.Workers {
					label := fmt.Sprintf("%s, %s, %s, %d workers", prof.Model, net.Name, name, w)
					if s.Progress != nil {
						s.Progress(len(points), s.Jobs(), label)
					}
					res, err := Simulate(Job{Profile: prof, Workers: w, Network: net.Model, Selection: s.Selection,
						Pipeline: factory, Steps: s.Steps, Warmup: s.Warmup, Gradients: grads, Seed: s.Seed, Density: s.Density})
					if err != nil {
						return nil, fmt.Errorf("simulating %s: %w", label, err)
					}
					points = append(points, newPoint(prof.Model, net.Name, name, res))
				}
			}
		}
	}
	return points, nil
}

func newPoint(model, network, pipeline string, res Result) Point {
	p := Point{Model: model, Network: network, Pipeline: pipeline, Result: res}
	if res.IterationMS > 0 {
		p.Efficiency = res.ComputeMS / res.IterationMS
	}
	return p
}
