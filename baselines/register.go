package baselines

import (
	"fmt"
	"slices"

	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipelines"
)

// The baselines join the registry of package pipelines here, each with the keys it reads.
func init() {
	sparse := pipelines.Common
	fused := func(keys ...string) []string { return append(append([]string{"fusion-mb"}, sparse...), keys...) }
	// The pipelines that select by thresholds of their own take no selector.
	ownThreshold := func(keys ...string) []string {
		return append(slices.DeleteFunc(slices.Clone(sparse), func(k string) bool { return k == "selector" }), keys...)
	}
	for _, s := range []pipelines.Spec{
		{
			Name:        "dense",
			Description: "Horovod's tensor fusion: gradients packed into buffers, each allreduced while backward goes on",
			Reads:       []string{"fusion-mb"},
			New: func(b pipelines.Build) (pipeline.Pipeline, error) {
				if b.Comm.Size() == 1 {
					return pipeline.NewLocal(b.Tensors), nil
				}
				return NewDense(b.Comm, b.Tensors, b.FusionBytes())
			},
		},
		{
			Name:        "pertensor",
			Description: "top-k of every tensor on its own, then the sparse results fused: no tensor goes missing, many small selections",
			Reads:       fused(),
			Tolerance:   0.05,
			New: func(b pipelines.Build) (pipeline.Pipeline, error) {
				return NewPerTensor(b.Comm, b.Tensors, b.FusionBytes(), b.Sparse())
			},
		},
		{
			Name:        "multitensor",
			Description: "one top-k over each whole fusion buffer: cheap, but a tensor whose elements are all small goes missing",
			Reads:       fused(),
			Tolerance:   0.05,
			New: func(b pipelines.Build) (pipeline.Pipeline, error) {
				return NewMultiTensor(b.Comm, b.Tensors, b.FusionBytes(), b.Sparse())
			},
		},
		{
			Name:        "safusion",
			Description: "SAFusion: per-tensor selection aligned across ranks, buffers sized by a cost model, sparse allreduce",
			Reads:       fused("cost-alpha", "cost-beta", "safusion-align"),
			Tolerance:   0.05,
			New: func(b pipelines.Build) (pipeline.Pipeline, error) {
				var opts []SAFusionOption
				if !b.Settings.SAFusionAlign {
					opts = append(opts, SAFusionUnaligned())
				}
				return NewSAFusion(b.Comm, b.Tensors, b.FusionBytes(), b.Sparse(), planOn(b.Network), 0, opts...)
			},
		},
		{
			Name:        "exdyna",
			Description: "ExDyna: the flattened gradient partitioned among the ranks, each selecting its part by a dynamic threshold",
			Reads:       ownThreshold("exdyna-threshold"),
			Tolerance:   0.2,
			Check: func(s pipelines.Settings) error {
				switch s.ExDynaThreshold {
				case "measured", "paper":
					return nil
				}
				return fmt.Errorf("exdyna-threshold must be measured or paper, got %q", s.ExDynaThreshold)
			},
			New: func(b pipelines.Build) (pipeline.Pipeline, error) {
				var opts []ExDynaOption
				if b.Settings.ExDynaThreshold == "paper" {
					opts = append(opts, ExDynaPaperThreshold())
				}
				return NewExDyna(b.Comm, b.Tensors, b.Sparse(), opts...)
			},
		},
		{
			Name:        "oktopk",
			Description: "Ok-Topk: thresholds estimated every few steps, a sparse reduce-scatter by region, then an allgather",
			Reads:       ownThreshold(),
			Tolerance:   0.5,
			New: func(b pipelines.Build) (pipeline.Pipeline, error) {
				return NewOkTopk(b.Comm, b.Tensors, b.Sparse())
			},
		},
		{
			Name:        "spardl",
			Description: "SparDL: the gradient split in blocks, sparse reduce-scatter with spar-reduce, then an allgather",
			Reads:       ownThreshold(),
			Tolerance:   0.3,
			New: func(b pipelines.Build) (pipeline.Pipeline, error) {
				return NewSparDL(b.Comm, b.Tensors, b.Sparse())
			},
		},
		{
			Name:        "cupcake",
			Description: "Cupcake: tensors grouped by a search over fusion sizes, each group compressed by one selection",
			Reads:       sparse,
			Tolerance:   0.05,
			New: func(b pipelines.Build) (pipeline.Pipeline, error) {
				return NewCupcake(b.Comm, b.Tensors, b.Sparse(), 0)
			},
		},
		{
			Name:        "omgs",
			Description: "OMGS-SGD: tensors merged by a cost model into groups, one top-k over each merged group",
			Reads:       fused("cost-alpha", "cost-beta", "select-ns"),
			Tolerance:   0.05,
			New: func(b pipelines.Build) (pipeline.Pipeline, error) {
				return NewOMGS(b.Comm, b.Tensors, b.FusionBytes(), b.Sparse(), planOn(b.Network), b.Settings.SelectNS*1e-9, 0)
			},
		},
		{
			Name:        "powersgd",
			Description: "PowerSGD as PyTorch's DDP hook runs it: each matrix-shaped gradient sent as a rank-r product",
			Reads:       []string{"fusion-mb", "powersgd-rank", "powersgd-warmup-steps", "error-feedback"},
			New: func(b pipelines.Build) (pipeline.Pipeline, error) {
				s := b.Settings
				return NewPowerSGD(b.Comm, b.Tensors, b.FusionBytes(), PowerSGDConfig{
					Rank: s.PowerSGDRank, WarmupSteps: s.PowerSGDWarmupSteps, ErrorFeedback: s.ErrorFeedback, Seed: b.Seed,
				})
			},
		},
	} {
		pipelines.Register(s)
	}
}

// planOn is the network a planner plans on: the zero network, its default, when there is
// none.
func planOn(net *netmodel.Network) netmodel.Network {
	if net == nil {
		return netmodel.Network{}
	}
	return *net
}
