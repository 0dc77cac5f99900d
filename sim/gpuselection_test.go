package sim

import (
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/compress"
)

func TestGPUSelectionModelKinds(t *testing.T) {
	gpu, cpu := GPUSelectionModel(), DefaultSelectionModel()
	for _, kind := range selectionKinds {
		l, ok := gpu.Kinds[kind]
		if !ok {
			t.Errorf("GPUSelectionModel has no %q", kind)
			continue
		}
		if !(l.PerElementNS > 0) || !(l.PerCallNS > 0) {
			t.Errorf("GPUSelectionModel %q = %+v, want positive PerCallNS and PerElementNS", kind, l)
		}
		// Launches and host waits are what the GPU model is about: a selection of a few
		// elements costs more there than on the CPU, whatever the kind; a low-rank
		// product is a single operator with no wait, against a CPU product's call of
		// about a microsecond.
		factor := time.Duration(10)
		if kind == compress.LowRankKind {
			factor = 3
		}
		if got, cpuTime := gpu.Time(kind, 100), cpu.Time(kind, 100); got <= factor*cpuTime {
			t.Errorf("%s on 100 elements: GPU %v, CPU %v; want the GPU's launches to cost over %dx more", kind, got, cpuTime, factor)
		}
	}
	if gpu.Kinds["sampled"] != gpu.Kinds["dgc"] || gpu.Steps["sampled"] != gpu.Steps["dgc"] {
		t.Errorf(`"sampled" = %+v %+v, "dgc" = %+v %+v; want the same selector's cost`,
			gpu.Kinds["sampled"], gpu.Steps["sampled"], gpu.Kinds["dgc"], gpu.Steps["dgc"])
	}
	// Each call builds its own maps.
	gpu.Kinds["topk"], gpu.Steps["topk"] = Linear{}, Step{}
	if again := GPUSelectionModel(); again.Kinds["topk"] == (Linear{}) || again.Steps["topk"] == (Step{}) {
		t.Error("changing one GPUSelectionModel's maps changed the next one")
	}
}

// TestGPUSelectionModelPerCallDominates checks the regime the GPU model is for: selecting
// from many small tensors one by one costs far more than from one tensor of the same
// elements and more, while on the CPU the same work costs about what its elements do.
func TestGPUSelectionModelPerCallDominates(t *testing.T) {
	gpu, cpu := GPUSelectionModel(), DefaultSelectionModel()
	for _, c := range []struct {
		kind        string
		count, n    int // many calls of n elements...
		one         int // ...against one call of this many
		minGPURatio float64
	}{
		{"topk", 300, 10_000, 3_000_000, 10},
		{"dgc", 300, 10_000, 3_000_000, 10},
		{"gaussiank", 300, 10_000, 3_000_000, 10},
		{"randomk", 300, 10_000, 3_000_000, 10},
		{"threshold", 300, 10_000, 3_000_000, 10},
		// ResNet-50's 107 BatchNorm vectors against its largest convolution.
		{"topk", 107, 1024, 2_359_296, 10},
	} {
		ratio := func(m SelectionModel) float64 {
			return float64(time.Duration(c.count)*m.Time(c.kind, c.n)) / float64(m.Time(c.kind, c.one))
		}
		if r := ratio(gpu); r < c.minGPURatio {
			t.Errorf("GPU %s: %d calls on %d elements cost %.1fx one call on %d, want at least %gx",
				c.kind, c.count, c.n, r, c.one, c.minGPURatio)
		}
		if r := ratio(cpu); r > 1.5 {
			t.Errorf("CPU %s: %d calls on %d elements cost %.1fx one call on %d, want about the elements' worth",
				c.kind, c.count, c.n, r, c.one)
		}
	}
}

// TestGPUSelectionModelTopKMultiBlock checks that top-k pays the multi-block path's
// launches from the size PyTorch takes it, and not below.
func TestGPUSelectionModelTopKMultiBlock(t *testing.T) {
	m := GPUSelectionModel()
	below, at := m.Time("topk", topkMultiBlockFrom-1), m.Time("topk", topkMultiBlockFrom)
	if jump := at - below; jump < time.Duration(topkMultiBlockLaunches*gpuLaunchNS) {
		t.Errorf("topk from %d to %d elements: %v to %v, want a jump of the multi-block launches", topkMultiBlockFrom-1, topkMultiBlockFrom, below, at)
	}
	// Between the two paths' sizes, time grows only with the elements.
	if d1, d2 := m.Time("topk", 2*topkMultiBlockFrom)-at, m.Time("topk", 3*topkMultiBlockFrom)-m.Time("topk", 2*topkMultiBlockFrom); d1-d2 > 1 || d2-d1 > 1 {
		t.Errorf("topk above the step: steps of %d elements cost %v then %v, want equal", topkMultiBlockFrom, d1, d2)
	}
}
