package sim

import (
	"time"
)

// A NamedSetting is a cluster whose constants have a source, marked on every map whose
// axes reach it. Sources give, per constant, where its value comes from: a paper, a vendor
// figure, a library's own model, a measurement here, or "estimate".
type NamedSetting struct {
	Name      string
	Constants Constants
	// Selection names the selection model the setting's top-k line comes from.
	Selection string
	Sources   []Source
}

// A Source says where one constant of a NamedSetting comes from.
type Source struct {
	Constant, Value, From string
}

// a100ElementFactor is the A100's per-element selection cost over the V100's: the GPU
// model's per-element terms are bytes over bandwidth, and the A100 (40 GB, 1555 GB/s,
// NVIDIA A100 datasheet) has 1.73 times the V100's 900 GB/s.
const a100ElementFactor = v100BytesPerNS / 1555.0

// NamedSettings returns the settings every map marks. Their selection lines are those of
// the selection models here (GPUSelectionModel, DefaultSelectionModel), whose own sources
// are listed with them. A setting names no compute: every one runs the map's profile (the
// shipped ones are timed on a V100), so "this machine" is this CPU's selection and this
// machine's shared-memory link beside that compute, the regime where selection is dear.
func NamedSettings() []NamedSetting {
	gpu, cpu := GPUSelectionModel().Kinds["topk"], DefaultSelectionModel().Kinds["topk"]
	gpuSelection := Source{"selection", "", "the GPU model (sim.GPUSelectionModel): launches and host waits of the papers' PyTorch top-k on a V100, from published figures"}
	return []NamedSetting{
		{
			Name: "SSFusion testbed (8 V100, 10 Gbit/s)", Selection: "gpu",
			Constants: Constants{Workers: 8, BitsPerSecond: 10e9, Latency: 37 * time.Microsecond,
				SelectCallNS: gpu.PerCallNS, SelectElementNS: gpu.PerElementNS},
			Sources: []Source{
				{"workers, bandwidth", "8, 10 Gbit/s", "the SSFusion paper's testbed"},
				{"latency", "37us", "MG-WFBP's and SAFusion's 10 Gbit/s constant, 0.52 ms for a whole 8-worker allreduce, spread over its ring's 14 steps (our reading)"},
				gpuSelection,
			},
		},
		{
			Name: "V100, NCCL, 25 Gbit/s Ethernet", Selection: "gpu",
			Constants: Constants{Workers: 8, BitsPerSecond: 25e9, Latency: 9600 * time.Nanosecond,
				SelectCallNS: gpu.PerCallNS, SelectElementNS: gpu.PerElementNS},
			Sources: []Source{
				{"workers, bandwidth", "8, 25 Gbit/s", "a common cloud node of one V100 per worker (estimate)"},
				{"latency", "9.6us", "NCCL's tuning model: 9.6 us per inter-node step of a ring, Simple protocol (hwLat in NCCL's src/graph/tuning.cc, 2.1x releases)"},
				gpuSelection,
			},
		},
		{
			Name: "A100, NCCL, 100 Gbit/s InfiniBand", Selection: "gpu",
			Constants: Constants{Workers: 8, BitsPerSecond: 100e9, Latency: 9600 * time.Nanosecond,
				SelectCallNS: gpu.PerCallNS, SelectElementNS: gpu.PerElementNS * a100ElementFactor},
			Sources: []Source{
				{"workers, bandwidth", "8, 100 Gbit/s", "one A100 per node on HDR100 InfiniBand (estimate of a common cluster)"},
				{"latency", "9.6us", "NCCL's tuning model, as above"},
				{"selection", "", "the GPU model with the A100's 1555 GB/s (NVIDIA A100 datasheet) for the V100's 900 GB/s; launches and waits as on the V100 (estimate)"},
			},
		},
		{
			Name: "this machine's selection and link (2 workers)", Selection: "cpu",
			Constants: Constants{Workers: 2, BitsPerSecond: 113e9, Latency: 450 * time.Nanosecond,
				SelectCallNS: cpu.PerCallNS, SelectElementNS: cpu.PerElementNS},
			Sources: []Source{
				{"bandwidth, latency", "113 Gbit/s, 0.45us", "measured: our shared-memory allreduce of 2 ranks, 1 KB in 0.9 us and 1 MB in 74 us (docs/runs/2026-12-04.txt), fitted to 2 alpha + m beta"},
				{"selection", "", "measured: our top-k on this CPU (sim.DefaultSelectionModel, tools/fit-selection)"},
			},
		},
	}
}
