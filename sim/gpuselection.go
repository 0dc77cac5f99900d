package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
)

// The GPU selection model. A selection on a GPU is a short run of PyTorch operators, each
// a kernel launched from the host, and a few of them wait for the GPU to hand a number
// back. So it costs a fixed amount per call, the launches and the waits, and a little per
// element, the passes its kernels make over the tensor in GPU memory. Each kind's line is
// built from the operators that SSFusion's published PyTorch code (the artifact of the
// paper this project reproduces, run there with PyTorch 2.3) calls for that selector, and
// from the per-operator and per-byte costs below. Every figure says where it comes from;
// those marked as estimates are ours.
//
// The model keeps what our Select times and nothing else: error-feedback accumulation is
// left out on the GPU as on the CPU (no pipeline's accumulate is timed), and so is the
// artifact's copy of the accumulated gradient into the residual, which our memory does in
// place; the clearing of the sent elements from the residual stays in.

const (
	// gpuLaunchNS is the host's cost of launching one kernel: "Usually, the launch time on
	// the CPU side is between 5-20 microseconds" (Meta's Holistic Trace Analysis
	// documentation, "CUDA Kernel Launch Statistics", which measures it from PyTorch
	// traces). We take the low end: a selection's kernels go out back to back from one
	// thread, with nothing else between them.
	gpuLaunchNS = 5000

	// gpuDispatchNS is PyTorch's own cost of calling an operator before it launches
	// anything: "Overhead for torch functions when run on torch.Tensor objects is on the
	// order of 2 μs" (README of PyTorch's __torch_function__ micro-benchmarks). Host-only
	// operators (a tensor made on the CPU) pay only this.
	gpuDispatchNS = 2000

	// gpuSyncNS is one wait of the host for the GPU: a Python if on a GPU scalar, float()
	// of one, a nonzero (which must learn its count before it can allocate), or an index
	// tensor made on the CPU and copied over from pageable memory. The GPU's work queued
	// before the wait is counted by the per-element terms; this is the round trip of the
	// small copy. An estimate (two launches' worth): we found no published measurement of
	// it.
	gpuSyncNS = 10000

	// v100BytesPerNS is the V100's peak memory bandwidth, 900 GB/s (NVIDIA Tesla V100
	// datasheet, HBM2), the GPU the shipped profiles are timed on.
	v100BytesPerNS = 900.0

	// topkEfficiency is the fraction of peak bandwidth that PyTorch's multi-block top-k
	// reaches. Derived from a torch.topk speed report on PyTorch's issue tracker (torch
	// 2.4.1, NVIDIA L20, November 2025): top-1000 of each of 128 rows of 8,000,000 fp16
	// values took 11.31 ms. Radix selection on 16-bit keys reads the input once per 8-bit
	// digit (two passes) and once more to gather, 3 x 2 bytes an element, so the kernels
	// moved 6.14 GB in 11.31 ms: 543 GB/s, 63% of the L20's 864 GB/s (NVIDIA L20 product
	// brief). We apply the same fraction to every pass, the element-wise ones included
	// (those usually come closer to peak, so this errs slow).
	topkEfficiency = 128 * 8e6 * 3 * 2 / 11.31e6 / 864

	// topkMultiBlockFrom and topkMultiBlockLaunches: PyTorch's CUDA top-k selects from one
	// row with a single thread block below 20000 elements, one kernel in all, and from
	// 20000 on with many blocks (should_use_multiblock in PyTorch's CUDA top-k). The
	// multi-block path (mbtopk::launch there) makes 17 launches for a float32 row: two
	// memsets and a fill, a radixFindKthValues and a computeBlockwiseWithinKCounts per
	// 8-bit digit (four digits), a computeBlockwiseKthCounts, two CUB scans by key of two
	// kernels each, and the gatherTopK; 16 more than the single-block path.
	topkMultiBlockFrom     = 20000
	topkMultiBlockLaunches = 16

	// topkPassBytes is the multi-block top-k's traffic per element: four radix passes
	// and the gather each read the 4-byte input once.
	topkPassBytes = 5 * 4

	// nonzeroLaunches is what torch.nonzero (torch.where on a mask) launches beyond its
	// first kernel: it counts the mask, copies the count to the host, and selects; we
	// count two more kernels besides the wait (an estimate from that structure).
	nonzeroLaunches = 2

	// maskScanBytes is a full-tensor threshold test as the artifact writes it: abs (read
	// and write 4 bytes), >= (read 4, write a 1-byte mask), and nonzero (read the mask
	// twice: count, then select).
	maskScanBytes = 8 + 5 + 2

	// lowRankBytesPerMAC is a rank-2 product of PowerSGD's on the GPU: one torch.matmul
	// that reads (or, for PQᵀ, writes) M's 4 bytes an element once, for 2 multiply-adds.
	lowRankBytesPerMAC = 4.0 / 2
)

// GPUConstants are the figures the GPU selection model is built from: a selection is
// operators, each paying PyTorch's dispatch and (on the GPU) a kernel launch, waits of
// the host for a number from the GPU, and bytes its kernels move at the bandwidth they
// reach. V100Constants gives them for the shipped profiles' GPU, each with its source;
// tools/gpu-selection measures them on a user's GPU (LoadGPUConstants reads its file).
type GPUConstants struct {
	Device     string  `json:"device"`       // what they were measured on, for reports
	DispatchNS float64 `json:"dispatch_ns"`  // PyTorch's cost of calling an operator
	LaunchNS   float64 `json:"launch_ns"`    // the host's cost of launching one kernel
	SyncNS     float64 `json:"sync_ns"`      // one wait of the host for a number from the GPU
	BytesPerNS float64 `json:"bytes_per_ns"` // what the selection kernels move per ns (GB/s)
	// Sources says where each figure comes from, by its JSON name.
	Sources map[string]string `json:"sources,omitempty"`
}

// V100Constants are the GPU model's figures for an NVIDIA V100 as the constants above
// derive them.
func V100Constants() GPUConstants {
	return GPUConstants{
		Device: "NVIDIA V100 (from published figures)", DispatchNS: gpuDispatchNS, LaunchNS: gpuLaunchNS, SyncNS: gpuSyncNS,
		BytesPerNS: topkEfficiency * v100BytesPerNS,
		Sources: map[string]string{
			"dispatch_ns":  "PyTorch's __torch_function__ micro-benchmarks: about 2 us an operator",
			"launch_ns":    "Meta's Holistic Trace Analysis: kernel launches take 5-20 us on the host; the low end",
			"sync_ns":      "estimate: two launches' worth, no published measurement found",
			"bytes_per_ns": "63% of the V100's 900 GB/s (datasheet), the fraction a published torch.topk timing reaches",
		},
	}
}

// LoadGPUConstants reads GPU constants from a JSON file such as tools/gpu-selection
// writes, and checks them: every time at least 0 and finite, the bandwidth positive.
func LoadGPUConstants(path string) (GPUConstants, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return GPUConstants{}, fmt.Errorf("reading selection costs: %w", err)
	}
	var g GPUConstants
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return GPUConstants{}, fmt.Errorf("reading selection costs %s: %w", path, err)
	}
	for name, v := range map[string]float64{"dispatch_ns": g.DispatchNS, "launch_ns": g.LaunchNS, "sync_ns": g.SyncNS} {
		if !(v >= 0) || math.IsInf(v, 0) {
			return GPUConstants{}, fmt.Errorf("selection costs %s: %s is %g, want a time of at least 0 ns", path, name, v)
		}
	}
	if !(g.BytesPerNS > 0) || math.IsInf(g.BytesPerNS, 0) {
		return GPUConstants{}, fmt.Errorf("selection costs %s: bytes_per_ns is %g, want a positive bandwidth", path, g.BytesPerNS)
	}
	if g.DispatchNS+g.LaunchNS == 0 {
		return GPUConstants{}, fmt.Errorf("selection costs %s: dispatch_ns and launch_ns are both 0, so a selection would cost nothing a call", path)
	}
	return g, nil
}

// line is the Linear cost of a selection made of ops kernel-launching operators, hostOps
// operators that run on the host, syncs waits for the GPU, extra kernels launched inside
// the operators beyond their first, and bytes moved per element of the tensor.
func (g GPUConstants) line(ops, hostOps, syncs, extra int, bytes float64) Linear {
	return Linear{
		PerCallNS: float64(ops)*(g.DispatchNS+g.LaunchNS) + float64(hostOps)*g.DispatchNS +
			float64(syncs)*g.SyncNS + float64(extra)*g.LaunchNS,
		PerElementNS: bytes / g.BytesPerNS,
	}
}

// GPUSelectionModel returns selection times on an NVIDIA V100 running the selectors as
// SSFusion's published PyTorch code runs them: per call, the launches and host waits of
// its operators; per element, the bytes their kernels move at the bandwidth top-k reaches.
// The constants above give each figure's source. It is the model to use for the papers'
// regime, where per-tensor selection pays a fixed GPU cost for every tensor; use
// DefaultSelectionModel for what our own selectors cost on this machine's CPU.
//
// Per kind (at density 0.01 where it matters, as DefaultSelectionModel):
//
//	topk       abs, topk, gather of the values, clearing of the sent elements: 4 operators,
//	           no wait (EFTopKCompressor.compress). Above 20000 elements topk takes the
//	           multi-block path: a Step of 16 launches. Per element abs (8 bytes) and the
//	           top-k passes (20 bytes); the O(k) gathers are left out.
//	dgc        a sample index drawn on the host (3 host operators) and copied over (a
//	           wait), the sample's gather, abs, top-k and min, the full tensor's abs, >=
//	           and sum, the two threshold checks of one round of its loop (2 operators, 2
//	           waits), nonzero (a wait), the values' gather and the clearing: 12
//	           operators, 4 waits (DgcCompressor.compress, which leaves the clearing out;
//	           we add it, as our pipelines keep residuals). One round is the usual case on
//	           bell-shaped gradients; each further round adds 3 operators and a wait. The
//	           sample's top-k goes multi-block when the sample (1% of the tensor at
//	           density 0.01) reaches 20000 elements: a Step at 2,000,000. Per element the
//	           mask scan (15 bytes) and the sum (1 byte).
//	gaussiank  std, mean, two float() reads of them (2 waits), abs, >=, sum, nonzero (a
//	           wait), the values' gather and the clearing: 8 operators, 3 waits
//	           (GaussianCompressor.compress). The host's normal quantile (SciPy's ppf)
//	           is not counted. Per element std and mean (4 bytes each), the mask scan and
//	           the sum (16 bytes).
//	randomk    randperm of the whole tensor, the values' gather and the clearing: 3
//	           operators (RandomKCompressor.compress). PyTorch's CUDA randperm writes an
//	           arange and random keys, radix-sorts the pairs with CUB and shuffles runs
//	           of equal keys: 10 launches beyond its first, an estimate from
//	           that structure. Per element: 8 + 8 bytes written for arange and keys, a
//	           histogram pass reading the keys (8), six 8-bit passes that each read and
//	           write an 8-byte key and an 8-byte value (32 bytes a pass), and the
//	           shuffle's read of the keys (8): 224 bytes, for tensors above about 46000
//	           elements, whose keys need more than 32 bits; smaller ones sort 32-bit keys
//	           in four passes, about half that. Unlike our randomk, which draws k
//	           indices, this is the most expensive selector per element on the GPU.
//	threshold  ExDyna's scan of its partition as the artifact scans a tensor for a
//	           threshold it already has: abs, >=, nonzero (a wait), the values' gather: 4
//	           operators, 1 wait; the mask scan's 15 bytes an element. ExDyna's own code
//	           was not consulted.
//	lowrank    one of PowerSGD's three products per matrix and step, as PyTorch's
//	           PowerSGD hook makes it: one torch.matmul, which moves M's 4 bytes an
//	           element once (2 bytes a multiply-add at rank 2; n counts multiply-adds).
//	           Our pipeline counts the orthonormalisation of P as multiply-adds of the
//	           product after it; the hook's QR or Gram-Schmidt loop launches several
//	           kernels of its own per matrix, which this line leaves out, so PowerSGD's
//	           GPU figures stay somewhat optimistic.
//
// What it leaves out: PyTorch releases before 2022 selected from one row with a single
// thread block whatever its size (so says the description of the change that brought
// multiple blocks), likely why papers of 2019 to 2021 (gTop-k, Gaussian-k, MSTopK) report
// GPU top-k as slow: torch 1.1 took 25.6 ms for the top-1000 of 2,000,000 floats on a
// P100, eight times its full sort, per a report on PyTorch's issue tracker. This model
// follows current PyTorch, as the artifact does. Below 20000 elements top-k runs in one block, whose per-element cost is not
// that of the multi-block passes charged here; those tensors are small enough that their
// per-call cost dominates either way. A selection is timed as if it had the GPU to itself,
// even when it runs beside backward.
//
// Each call returns new maps, which the caller may change.
func GPUSelectionModel() SelectionModel { return V100Constants().Model() }

// Model is the GPU selection model (see GPUSelectionModel) at g's figures.
func (g GPUConstants) Model() SelectionModel {
	multiBlock := float64(topkMultiBlockLaunches) * g.LaunchNS
	dgc := g.line(12, 3, 4, nonzeroLaunches, maskScanBytes+1)
	return SelectionModel{
		Kinds: map[string]Linear{
			"topk":      g.line(4, 0, 0, 0, 8+topkPassBytes),
			"dgc":       dgc,
			"sampled":   dgc, // NewSelector's old name for dgc
			"gaussiank": g.line(8, 0, 3, nonzeroLaunches, 4+4+maskScanBytes+1),
			"randomk":   g.line(3, 0, 0, 10, 8+8+8+6*32+8),
			"threshold": g.line(4, 0, 1, nonzeroLaunches, maskScanBytes),
			"lowrank":   g.line(1, 0, 0, 0, lowRankBytesPerMAC),
		},
		Steps: map[string]Step{
			"topk":    {From: topkMultiBlockFrom, ExtraNS: multiBlock},
			"dgc":     {From: 100 * topkMultiBlockFrom, ExtraNS: multiBlock},
			"sampled": {From: 100 * topkMultiBlockFrom, ExtraNS: multiBlock},
		},
	}
}
