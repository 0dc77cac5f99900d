package sim

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/profile"
)

// tinySweep sweeps the tiny profile over pipelines at 2 and 4 workers, factory building
// each.
func tinySweep(pipelines []string, factory func(name string) Factory) *Sweep {
	return &Sweep{
		Profiles: []*profile.Profile{tinyProfile()}, Pipelines: pipelines, Workers: []int{2, 4},
		Networks:  []Net{{Name: "1Gbit", Model: netmodel.Network{Inter: netmodel.Link{Alpha: 1e-5, Beta: 8e-9}}}},
		Selection: DefaultSelectionModel(), Density: 0.01, Seed: 1, Parallel: 2,
		Factory: func(name string, _ Net) (Factory, error) { return factory(name), nil },
	}
}

// TestSweepRuns: every job gives its point, and progress counts each once.
func TestSweepRuns(t *testing.T) {
	s := tinySweep([]string{"dense", "pertensor", "exdyna"}, func(name string) Factory { return factories[name] })
	calls := 0
	s.Progress = func(done, total int, _ string) {
		calls++
		if done != calls || total != 6 {
			t.Errorf("progress %d of %d at call %d", done, total, calls)
		}
	}
	points, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 6 || calls != 6 {
		t.Fatalf("%d points, %d progress calls; want 6 of each", len(points), calls)
	}
	for _, p := range points {
		if p.Pipeline == "" || !(p.Result.SamplesPerS > 0) {
			t.Errorf("point %+v", p)
		}
	}
}

// TestSweepStopsOnFailure: a job that fails fails the sweep, naming the job, and the
// cancelled context stops the sweep with its error.
func TestSweepStopsOnFailure(t *testing.T) {
	broken := errors.New("broken pipeline")
	s := tinySweep([]string{"dense", "bad"}, func(name string) Factory {
		if name == "bad" {
			return func(dist.Communicator, []pipeline.Tensor) (pipeline.Pipeline, error) { return nil, broken }
		}
		return factories[name]
	})
	_, err := s.Run(context.Background())
	if !errors.Is(err, broken) || !strings.Contains(err.Error(), "bad") {
		t.Errorf("error %v, want the broken pipeline's, naming it", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tinySweep([]string{"dense"}, func(name string) Factory { return factories[name] }).Run(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled sweep: error %v, want context.Canceled", err)
	}
}
