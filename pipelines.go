package main

import (
	"errors"
	"fmt"

	"github.com/ssfusion/ssfusion/baselines"
	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/ssfusion"
	"github.com/ssfusion/ssfusion/trainer"
)

// newPipeline builds a pipeline for tensors over comm (never nil: a single process gets a
// one-rank communicator, so that sparsification and error feedback still apply). net is
// the network the planners plan with, SSFusion's choice of the tensors to sparsify and
// SAFusion's sizing of its buffers; nil for none (see planningNetwork).
type newPipeline func(cfg *trainer.Config, net *netmodel.Network, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error)

// pipelines maps --pipeline names to constructors. A new pipeline registers here; the trainer
// knows only the pipeline.Pipeline interface.
var pipelines = map[string]newPipeline{
	"dense": func(cfg *trainer.Config, net *netmodel.Network, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		if cfg.MomentumCorrection {
			return nil, errors.New("momentum-correction applies to sparsifying pipelines only; dense keeps momentum in the optimizer")
		}
		if !cfg.ErrorFeedback {
			return nil, fmt.Errorf("error-feedback=false applies to sparsifying pipelines only; dense sends every element and has nothing to keep or drop")
		}
		if comm.Size() == 1 {
			return pipeline.NewLocal(tensors), nil
		}
		return baselines.NewDense(comm, tensors, fusionBytes(cfg))
	},
	"pertensor": func(cfg *trainer.Config, net *netmodel.Network, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		return baselines.NewPerTensor(comm, tensors, fusionBytes(cfg), sparseConfig(cfg))
	},
	"multitensor": func(cfg *trainer.Config, net *netmodel.Network, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		return baselines.NewMultiTensor(comm, tensors, fusionBytes(cfg), sparseConfig(cfg))
	},
	"safusion": func(cfg *trainer.Config, net *netmodel.Network, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		var plan netmodel.Network // the zero network: SAFusion's default
		if net != nil {
			plan = *net
		}
		return baselines.NewSAFusion(comm, tensors, fusionBytes(cfg), sparseConfig(cfg), plan, 0)
	},
	"exdyna": func(cfg *trainer.Config, net *netmodel.Network, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		var opts []baselines.ExDynaOption
		if cfg.ExDynaThreshold == "paper" {
			opts = append(opts, baselines.ExDynaPaperThreshold())
		}
		return baselines.NewExDyna(comm, tensors, sparseConfig(cfg), opts...)
	},
	"oktopk": func(cfg *trainer.Config, net *netmodel.Network, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		return baselines.NewOkTopk(comm, tensors, sparseConfig(cfg))
	},
	"spardl": func(cfg *trainer.Config, net *netmodel.Network, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		return baselines.NewSparDL(comm, tensors, sparseConfig(cfg))
	},
	"cupcake": func(cfg *trainer.Config, net *netmodel.Network, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		return baselines.NewCupcake(comm, tensors, sparseConfig(cfg), 0)
	},
	"omgs": func(cfg *trainer.Config, net *netmodel.Network, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		var plan netmodel.Network // the zero network: the 10 Gbit/s default
		if net != nil {
			plan = *net
		}
		return baselines.NewOMGS(comm, tensors, fusionBytes(cfg), sparseConfig(cfg), plan, cfg.SelectNS*1e-9, 0)
	},
	"powersgd": func(cfg *trainer.Config, net *netmodel.Network, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		if cfg.MomentumCorrection {
			return nil, errors.New("momentum-correction applies to sparsifying pipelines only; PowerSGD keeps momentum in the optimizer, as the DDP hook does")
		}
		return baselines.NewPowerSGD(comm, tensors, fusionBytes(cfg), baselines.PowerSGDConfig{
			Rank: cfg.PowerSGDRank, WarmupSteps: cfg.PowerSGDWarmupSteps, ErrorFeedback: cfg.ErrorFeedback, Seed: uint64(cfg.Seed),
		})
	},
	// SSFusion and its ablations. The paper's code calls the variant without offloading or
	// interleaving plain "SSFusion"; here "ssfusion" is the whole system.
	"ssfusion":       ssfusionVariant(true, true),
	"ssfusion-naive": ssfusionVariant(false, false),
	"ssfusion-o":     ssfusionVariant(true, false),
	"ssfusion-i":     ssfusionVariant(false, true),
}

func ssfusionVariant(offload, interleave bool) newPipeline {
	return func(cfg *trainer.Config, net *netmodel.Network, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		rule, err := ssfusion.ParseRule(cfg.SelectRule)
		if err != nil {
			return nil, fmt.Errorf("select-rule: %w", err)
		}
		if rule == ssfusion.ByCost && net == nil {
			return nil, fmt.Errorf("select-rule cost leaves the choice to the cost model, which needs a network to plan on: an emulated link (--bandwidth) or --cost-alpha and --cost-beta")
		}
		return ssfusion.New(comm, tensors, fusionBytes(cfg), ssfusion.Config{
			Config:           sparseConfig(cfg),
			Rule:             rule,
			Threshold:        cfg.SelectThreshold,
			Network:          net,
			SelectPerElement: cfg.SelectNS * 1e-9,
			Offload:          offload,
			SelectWorkers:    cfg.SelectWorkers,
			Interleave:       interleave,
		})
	}
}

func fusionBytes(cfg *trainer.Config) int { return int(cfg.FusionMB * (1 << 20)) }

func sparseConfig(cfg *trainer.Config) compress.Config {
	c := compress.Config{Density: cfg.Density, Selector: cfg.Selector, Seed: uint64(cfg.Seed), WarmupSteps: cfg.DensityWarmupSteps,
		NoErrorFeedback: !cfg.ErrorFeedback}
	if cfg.MomentumCorrection {
		c.Momentum = cfg.Momentum
	}
	return c
}

// planningNetwork is the network the planners plan with in train: a flat network of the
// link the cost flags give when --cost-beta is set, else what our transport makes of the
// emulated link (--bandwidth, --latency) when there is one, else none (nil): SSFusion then
// sparsifies by its rule alone (the cost rule refuses to run) and SAFusion plans for its
// default network. simulate gives
// them the simulated network instead.
func planningNetwork(cfg *trainer.Config) (*netmodel.Network, error) {
	switch {
	case cfg.CostBeta > 0:
		return &netmodel.Network{Inter: netmodel.Link{Alpha: cfg.CostAlpha, Beta: cfg.CostBeta}}, nil
	case cfg.CostAlpha != 0:
		return nil, fmt.Errorf("--cost-alpha %g without --cost-beta: the cost flags give a link's two constants together", cfg.CostAlpha)
	}
	c, err := link(cfg)
	if err != nil || !c.Shaped() {
		return nil, err
	}
	net := c.Network()
	return &net, nil
}

// checkPipeline builds the pipeline cfg names on a one-rank communicator and a toy tensor,
// and closes it, so that a setting the pipeline refuses (dense with error-feedback off,
// SSFusion's cost rule without a network) is found before any worker starts rather than
// in each of them once all have, and run finds it for every cell before the first trains.
func checkPipeline(cfg trainer.Config) error {
	build, ok := pipelines[cfg.Pipeline]
	if !ok {
		return fmt.Errorf("unknown pipeline %q", cfg.Pipeline)
	}
	cfg.Resolve()
	net, err := planningNetwork(&cfg)
	if err != nil {
		return err
	}
	tensors := []pipeline.Tensor{{ID: 0, Name: "w", Dims: 2, Shape: []int{8, 8}, Grad: make([]float32, 64)}}
	p, err := buildAlone(build, &cfg, net, tensors)
	if err != nil {
		return fmt.Errorf("pipeline %s: %w", cfg.Pipeline, err)
	}
	return p.Close()
}
