package sim

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
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

// TestGPUConstantsFileRoundTrip: the V100's figures written as a file build the same
// model as GPUSelectionModel, and a file a user measured moves each line as its figures
// say: launches and waits per call, bandwidth per element.
func TestGPUConstantsFileRoundTrip(t *testing.T) {
	v100 := V100Constants()
	got, err := LoadGPUConstants(writeJSON(t, v100))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Model(), GPUSelectionModel()) {
		t.Errorf("the V100's figures from a file give %+v, want %+v", got.Model(), GPUSelectionModel())
	}
	faster := v100
	faster.LaunchNS, faster.DispatchNS, faster.SyncNS, faster.BytesPerNS = 0, 1000, 0, 2*v100.BytesPerNS
	top := faster.Model().Kinds["topk"]
	if want := 4 * 1000.0; top.PerCallNS != want {
		t.Errorf("top-k per call %g ns, want 4 operators of 1000 ns", top.PerCallNS)
	}
	if want := GPUSelectionModel().Kinds["topk"].PerElementNS / 2; !near(top.PerElementNS, want) {
		t.Errorf("top-k per element %g ns at twice the bandwidth, want %g", top.PerElementNS, want)
	}
}

func TestLoadGPUConstantsRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, body, want string }{
		{"not json", `{"launch_ns":`, "reading selection costs"},
		{"unknown field", `{"launch_ns":1,"dispatch_ns":1,"sync_ns":1,"bytes_per_ns":1,"lanch":2}`, "unknown field"},
		{"negative", `{"launch_ns":-1,"dispatch_ns":1,"sync_ns":1,"bytes_per_ns":1}`, "launch_ns is -1"},
		{"no bandwidth", `{"launch_ns":1,"dispatch_ns":1,"sync_ns":1}`, "bytes_per_ns is 0"},
		{"free calls", `{"launch_ns":0,"dispatch_ns":0,"sync_ns":1,"bytes_per_ns":1}`, "cost nothing a call"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
		if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadGPUConstants(path); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want one naming %s and saying %q", tc.name, err, path, tc.want)
		}
	}
	if _, err := LoadGPUConstants(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing file loaded")
	}
}

// TestMeasureScriptWritesLoadableCosts runs tools/gpu-selection/measure.py on the CPU, the
// only device here, and loads what it writes. It needs Python with PyTorch
// (python3-torch), which .ci/run installs before running the script again end to end.
func TestMeasureScriptWritesLoadableCosts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PyTorch")
	}
	python := ""
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import torch").Run() == nil {
			python = p
			break
		}
	}
	if python == "" {
		t.Skip("no python3 with PyTorch here (apt-get install python3-torch)")
	}
	out := filepath.Join(t.TempDir(), "costs.json")
	cmd := exec.Command(python, "../tools/gpu-selection/measure.py", "--device", "cpu", "--elements", "100000",
		"--calls", "20", "--repeats", "2", "--out", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("measure.py: %v\n%s", err, msg)
	}
	g, err := LoadGPUConstants(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(g.Device, "cpu") || len(g.Sources) != 4 {
		t.Errorf("costs %+v: want the device named and a source for each figure", g)
	}
	if top := g.Model().Kinds["topk"]; !(top.PerCallNS > 0) || !(top.PerElementNS > 0) {
		t.Errorf("top-k line %+v from measured figures, want positive costs", top)
	}
}

// writeJSON writes v as JSON into a temporary file and returns its path.
func writeJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "v.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
