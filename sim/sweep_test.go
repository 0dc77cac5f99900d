package sim

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipelines"
	"github.com/ssfusion/ssfusion/profile"
)

// tinySweep sweeps the tiny profile over the registered pipelines names at 2 and 4
// workers, with fusion buffers of 16 KiB.
func tinySweep(names []string) *Sweep {
	set := pipelines.DefaultSettings()
	set.FusionMB = 1.0 / 64
	return &Sweep{
		Profiles: []*profile.Profile{tinyProfile()}, Pipelines: names, Workers: []int{2, 4},
		Networks:  []Net{{Name: "1Gbit", Model: netmodel.Network{Inter: netmodel.Link{Alpha: 1e-5, Beta: 8e-9}}}},
		Selection: DefaultSelectionModel(), Settings: set, Seed: 1, Parallel: 2,
	}
}

// TestSweepRuns: every job gives its point, and progress counts each once.
func TestSweepRuns(t *testing.T) {
	s := tinySweep([]string{"dense", "pertensor", "exdyna"})
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
	pipelines.Register(pipelines.Spec{Name: "bad", Description: "fails to build",
		New: func(pipelines.Build) (pipeline.Pipeline, error) { return nil, broken }})
	defer pipelines.Unregister("bad")
	s := tinySweep([]string{"dense", "bad"})
	_, err := s.Run(context.Background())
	if !errors.Is(err, broken) || !strings.Contains(err.Error(), "bad") {
		t.Errorf("error %v, want the broken pipeline's, naming it", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tinySweep([]string{"dense"}).Run(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled sweep: error %v, want context.Canceled", err)
	}
}
