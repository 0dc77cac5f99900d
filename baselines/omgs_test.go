package baselines

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
)

// TestPlanMerges checks the merge plan against cases worked by hand. Four tensors of 100
// elements; an allgather costs 1 s plus 0.01 s per element, so merging two groups saves one
// second; selection is free unless said.
func TestPlanMerges(t *testing.T) {
	comm := func(elements, _ int) float64 { return 1 + 0.01*float64(elements) }
	sizes := []int{100, 100, 100, 100}
	for _, tc := range []struct {
		name      string
		backward  []float64
		selectSec float64
		want      []int
	}{
		// Tensor 1 comes 0.5 s after tensor 0: merging costs 0.5 s, saves 1 s. Tensor 2
		// comes 2 s later: it starts a group; the first group's allgather (3 s from 0.5 s)
		// still holds the link when tensor 2 is ready at 2.5 s, so waiting 1.5 s more for
		// tensor 3 costs only 0.5 s: merged.
		{"slack pays for a merge", []float64{0, 0.5, 2, 1.5}, 0, []int{2, 2}},
		// Tensor 3 2.5 s later costs 1.5 s beyond the slack: its own group.
		{"too late to merge", []float64{0, 0.5, 2, 2.5}, 0, []int{2, 1, 1}},
		{"all at once", []float64{0, 0, 0, 0}, 0, []int{4}},
		// Selection of the first group (200 elements at 5 ms: 1 s) delays backward, so
		// tensor 2 is ready at 3.5 s and its group's at 4 s (100 elements), while the first
		// group's allgather ends at 1.5 + 3 = 4.5 s: 0.5 s of slack, and tensor 3, 1.4 s
		// later, costs 0.9 s < 1 s: merged.
		{"selection delays backward", []float64{0, 0.5, 2, 1.4}, 0.005, []int{2, 2}},
		{"selection delays backward, later still", []float64{0, 0.5, 2, 1.6}, 0.005, []int{2, 1, 1}},
	} {
		if got := planMerges(tc.backward, sizes, tc.selectSec, comm); !slices.Equal(got, tc.want) {
			t.Errorf("%s: groups %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := planMerges([]float64{0}, []int{7}, 0, comm); !slices.Equal(got, []int{1}) {
		t.Errorf("one tensor: %v", got)
	}
	if got := planMerges(nil, nil, 0, comm); got != nil {
		t.Errorf("no tensors: %v", got)
	}
}

// OMGS-SGD re-plans its groups after the warm-up, every rank alike; error feedback loses
// nothing across the re-plan: what was applied plus the ranks' mean residual is the sum of
// the mean gradients.
func TestOMGSReplansAndKeepsResiduals(t *testing.T) {
	const world, steps, warmup = 2, 5, 2
	shapes := [][]int{{40, 30}, {8, 3, 3, 3}, {40}, {4, 4}, {300}}
	var plans [][]int
	cfg := compress.Config{Density: 0.1, Selector: "topk"}
	newPipe := func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		// A start-up of an hour merges everything into one group, whatever was measured.
		f, s, err := newOMGS(comm, tensors, 64, cfg, flatLink(3600, 1e-9), 3e-9, warmup)
		if err != nil {
			return nil, err
		}
		s.onReplan = func(_ []float64, counts []int) {
			if comm.Rank() == 0 {
				plans = append(plans, counts)
			}
		}
		return f, nil
	}
	grads := normalGrads(shapes)
	runs := runPipelines(t, world, steps, shapes, grads, newPipe, nil)
	if len(plans) != 1 || !slices.Equal(plans[0], []int{len(shapes)}) {
		t.Errorf("plans %v, want one plan of one group of %d tensors", plans, len(shapes))
	}
	for s := range steps {
		for id := range shapes {
			for j, v := range runs[0].Grads[s][id] {
				if math.Float32bits(v) != math.Float32bits(runs[1].Grads[s][id][j]) {
					t.Fatalf("step %d, tensor %d: the ranks differ", s, id)
				}
			}
		}
	}
	for id := range shapes {
		got, want := appliedAndKept(t, runs, grads, id, true)
		if e := relErr(got, want); e > 1e-4 {
			t.Errorf("tensor %v: applied plus residual is %.2g away from the sum of the gradients", shapes[id], e)
		}
	}
}

func TestNewOMGSRefusesBadSettings(t *testing.T) {
	tensors := psgdTensors(psgdShapes)
	good := compress.Config{Density: 0.1, Selector: "topk"}
	for _, tc := range []struct {
		name    string
		cfg     compress.Config
		net     netmodel.Network
		perElem float64
		warmup  int
		want    string
	}{
		{"one warm-up step", good, netmodel.Network{}, 3e-9, 1, "at least 2"},
		{"negative selection time", good, netmodel.Network{}, -1, 0, "selection time"},
		{"bad density", compress.Config{Density: 2, Selector: "topk"}, netmodel.Network{}, 3e-9, 0, "density"},
		{"bad network", good, flatLink(-1, 1), 3e-9, 0, "Alpha"},
	} {
		if _, err := NewOMGS(dist.NewInProc(1)[0], tensors, 64, tc.cfg, tc.net, tc.perElem, tc.warmup); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
