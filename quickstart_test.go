package main

import (
	"slices"
	"testing"

	"github.com/ssfusion/ssfusion/experiments"
	"github.com/ssfusion/ssfusion/fusion"
	"github.com/ssfusion/ssfusion/nets"
	"github.com/ssfusion/ssfusion/ssfusion"
	"github.com/ssfusion/ssfusion/trainer"
)

// TestQuickstartChoosesAsWithoutCostModel: the quickstart gives no cost flags, so SSFusion
// plans with its emulated link (2 workers, 60 Mbit/s, no latency), where it used to plan
// with no cost model at all. On that link, with the default selection cost, every tensor of
// ResNet-8 that the size threshold picks still pays off, so the choice, and with it the
// quickstart's training, is the same.
func TestQuickstartChoosesAsWithoutCostModel(t *testing.T) {
	spec, err := experiments.Load("experiments/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cells, err := spec.Expand(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(cells, func(c experiments.Cell) bool { return c.Config.Pipeline == "ssfusion" })
	if i < 0 {
		t.Fatal("the quickstart has no ssfusion cell")
	}
	cfg := cells[i].Config
	net, err := trainer.PlanningNetwork(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if net == nil {
		t.Fatalf("no planning network for the quickstart's link %q", cfg.Bandwidth)
	}
	model, err := nets.New(nets.Spec{Arch: cfg.Model, BatchSize: cfg.BatchSize, Seed: cfg.Seed, WidthMult: cfg.Width,
		Channels: 1, Height: 28, Width: 28, Classes: 10}) // MNIST's shape
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	params := model.Params()
	// The fusion buffers as fusion.Fusion plans them, over the backprop order.
	order := make([]int, len(params))
	for i := range order {
		order[i] = len(params) - 1 - i
	}
	buckets, err := fusion.PlanBuckets(order, func(id int) int { return params[id].Numel() }, int(cfg.FusionMB*(1<<20)))
	if err != nil {
		t.Fatal(err)
	}
	sparsified := 0
	for _, b := range buckets {
		sizes := make([]int, len(b.Tensors))
		for i, id := range b.Tensors {
			sizes[i] = params[id].Numel()
		}
		candidates := ssfusion.Candidates(ssfusion.BySize, sizes, nil, cfg.SelectThreshold)
		without := ssfusion.Choose(candidates, sizes, cfg.Density, nil, 0, cfg.Workers)
		with := ssfusion.Choose(candidates, sizes, cfg.Density, net, cfg.SelectNS*1e-9, cfg.Workers)
		if !slices.Equal(with, without) {
			t.Errorf("tensors %v: planning with %v chooses %v, without a cost model %v", sizes, net, with, without)
		}
		for _, s := range with {
			if s {
				sparsified++
			}
		}
	}
	if sparsified == 0 {
		t.Errorf("nothing of ResNet-8 is sparsified: the comparison proves nothing")
	}
	t.Logf("%d tensors in %d buffers, %d sparsified, planning with %v", len(params), len(buckets), sparsified, net)
}
