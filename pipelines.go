package main

import (
	"fmt"

	"github.com/ssfusion/ssfusion/baselines"
	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/ssfusion"
	"github.com/ssfusion/ssfusion/trainer"
)

// newPipeline builds a pipeline for tensors over comm (never nil: a single process gets a
// one-rank communicator, so that sparsification and error feedback still apply).
type newPipeline func(cfg *trainer.Config, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error)

// pipelines maps --pipeline names to constructors. A new pipeline registers here; the trainer
// knows only the pipeline.Pipeline interface.
var pipelines = map[string]newPipeline{
	"dense": func(cfg *trainer.Config, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		if cfg.MomentumCorrection {
			return nil, fmt.Errorf("momentum-correction applies to sparsifying pipelines only; dense keeps momentum in the optimizer")
		}
		if comm.Size() == 1 {
			return pipeline.NewLocal(tensors), nil
		}
		return baselines.NewDense(comm, tensors, fusionBytes(cfg))
	},
	"pertensor": func(cfg *trainer.Config, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		return baselines.NewPerTensor(comm, tensors, fusionBytes(cfg), sparseConfig(cfg))
	},
	"multitensor": func(cfg *trainer.Config, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		return baselines.NewMultiTensor(comm, tensors, fusionBytes(cfg), sparseConfig(cfg))
	},
	"safusion": func(cfg *trainer.Config, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		cost, err := linkCost(cfg)
		if err != nil {
			return nil, err
		}
		return baselines.NewSAFusion(comm, tensors, fusionBytes(cfg), sparseConfig(cfg), cost, 0)
	},
	"exdyna": func(cfg *trainer.Config, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		return baselines.NewExDyna(comm, tensors, sparseConfig(cfg))
	},
	// SSFusion and its ablations. The paper's code calls the variant without offloading or
	// interleaving plain "SSFusion"; here "ssfusion" is the whole system.
	"ssfusion":       ssfusionVariant(true, true),
	"ssfusion-naive": ssfusionVariant(false, false),
	"ssfusion-o":     ssfusionVariant(true, false),
	"ssfusion-i":     ssfusionVariant(false, true),
}

func ssfusionVariant(offload, interleave bool) newPipeline {
	return func(cfg *trainer.Config, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		return ssfusion.New(comm, tensors, fusionBytes(cfg), ssfusion.Config{
			Config:        sparseConfig(cfg),
			Threshold:     cfg.SelectThreshold,
			Cost:          ssfusion.CostModel{Alpha: cfg.CostAlpha, Beta: cfg.CostBeta, SelectPerElement: cfg.SelectNS * 1e-9},
			Offload:       offload,
			SelectWorkers: cfg.SelectWorkers,
			Interleave:    interleave,
		})
	}
}

func fusionBytes(cfg *trainer.Config) int { return int(cfg.FusionMB * (1 << 20)) }

func sparseConfig(cfg *trainer.Config) compress.Config {
	c := compress.Config{Density: cfg.Density, Selector: cfg.Selector, Seed: uint64(cfg.Seed), WarmupSteps: cfg.DensityWarmupSteps}
	if cfg.MomentumCorrection {
		c.Momentum = cfg.Momentum
	}
	return c
}

// linkCost is the alpha-beta model SAFusion sizes its buffers with: --cost-alpha and
// --cost-beta when given, else the emulated link's latency and bandwidth, else (both zero)
// PAPERS.md's 10 Gbit/s constants.
func linkCost(cfg *trainer.Config) (baselines.LinkCost, error) {
	cost := baselines.LinkCost{Alpha: cfg.CostAlpha, Beta: cfg.CostBeta}
	if cost.Beta > 0 {
		return cost, nil
	}
	bandwidth, latency, err := link(*cfg)
	if err != nil || bandwidth <= 0 {
		return cost, err
	}
	cost.Beta = 8 / bandwidth // bandwidth is in bits per second, beta in seconds per byte
	if cost.Alpha == 0 {
		cost.Alpha = latency.Seconds()
	}
	return cost, nil
}
