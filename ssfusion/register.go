package ssfusion

import (
	"errors"
	"fmt"

	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipelines"
)

// SSFusion and its ablations join the registry of package pipelines. The authors' code
// calls the variant without offloading or interleaving plain "SSFusion"; here "ssfusion"
// is the whole system.
func init() {
	for _, v := range []struct {
		name, description   string
		offload, interleave bool
	}{
		{"ssfusion", "SSFusion: a selected subset of each fusion buffer's tensors sparsified one by one, the rest dense; selection offloaded, dense and sparse collectives interleaved", true, true},
		{"ssfusion-naive", "SSFusion's selective sparsification alone: selection on the pushing goroutine, collectives one at a time", false, false},
		{"ssfusion-o", "SSFusion with offloaded selection, without interleaving", true, false},
		{"ssfusion-i", "SSFusion with interleaved collectives, without offloading", false, true},
	} {
		reads := append([]string{"fusion-mb"}, pipelines.Common...)
		reads = append(reads, "select-threshold", "select-rule", "select-ns", "cost-alpha", "cost-beta")
		if v.offload {
			reads = append(reads, "select-workers")
		}
		pipelines.Register(pipelines.Spec{
			Name: v.name, Description: v.description, Reads: reads, Tolerance: 0.05,
			Ablation: v.name != "ssfusion",
			Check: func(s pipelines.Settings) error {
				if _, err := ParseRule(s.SelectRule); err != nil {
					return fmt.Errorf("select-rule: %w", err)
				}
				return nil
			},
			New: newVariant(v.offload, v.interleave),
		})
	}
}

func newVariant(offload, interleave bool) func(pipelines.Build) (pipeline.Pipeline, error) {
	return func(b pipelines.Build) (pipeline.Pipeline, error) {
		s := b.Settings
		rule, err := ParseRule(s.SelectRule)
		if err != nil {
			return nil, err
		}
		if rule == ByCost && b.Network == nil {
			return nil, errors.New("select-rule cost leaves the choice to the cost model, which needs a network to plan on: an emulated link (--bandwidth) or --cost-alpha and --cost-beta")
		}
		return New(b.Comm, b.Tensors, b.FusionBytes(), Config{
			Config:           b.Sparse(),
			Rule:             rule,
			Threshold:        s.SelectThreshold,
			Network:          b.Network,
			SelectPerElement: s.SelectNS * 1e-9,
			Offload:          offload,
			SelectWorkers:    s.SelectWorkers,
			Interleave:       interleave,
		})
	}
}
