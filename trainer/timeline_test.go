package trainer

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ssfusion/ssfusion/dist/inproc"
)

// TestTimelineRecordsTheLastSteps trains two ranks with SSFusion and reads rank 0's trace:
// only the last steps, each with its compute, its wait and update, the gradients handed
// over, the selections the pipeline timed and its collectives, every event inside its step.
func TestTimelineRecordsTheLastSteps(t *testing.T) {
	cfg := quick(t, "mlp", "synthetic", 6)
	cfg.Workers, cfg.Pipeline, cfg.TimelineSteps = 2, "ssfusion", 2
	cfg.SelectThreshold = 1 // every tensor sparsified: the step selects
	comms := inproc.New(2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, comm := range comms {
		wg.Go(func() {
			defer comm.Close()
			_, errs[r] = Run(context.Background(), cfg, Options{Comm: comm})
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(cfg.Out, TimelineFile))
	if err != nil {
		t.Fatal(err)
	}
	var trace struct {
		TraceEvents []struct {
			Name, Cat, Ph string
			TS, Dur       float64
			TID           int
			Args          map[string]any
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(raw, &trace); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	steps := map[float64]bool{}
	for _, e := range trace.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		count[e.Cat]++
		steps[e.Args["step"].(float64)] = true
		if e.TS < 0 || e.Dur < 0 || timelineLanes[e.TID] != e.Cat {
			t.Errorf("event %+v: before the first recorded step, of negative length or in another lane", e)
		}
	}
	if len(steps) != 2 || !steps[4] || !steps[5] {
		t.Errorf("recorded steps %v, want the last two (4 and 5)", steps)
	}
	params := len(newTestModelParams(t, cfg))
	for lane, want := range map[string]int{laneCompute: 2, laneWait: 2, laneUpdate: 2, laneGradients: 2 * params} {
		if count[lane] != want {
			t.Errorf("%d events in lane %q, want %d", count[lane], lane, want)
		}
	}
	if count[laneSelection] < 2 || count[laneCollective] < 2 {
		t.Errorf("%d selections and %d collectives recorded, want some in each step", count[laneSelection], count[laneCollective])
	}
}

// newTestModelParams builds the model of cfg to count its parameters.
func newTestModelParams(t *testing.T, cfg Config) []string {
	t.Helper()
	r, err := newRun(&cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	names := make([]string, len(r.params))
	for i, p := range r.params {
		names[i] = p.Name
	}
	return names
}
