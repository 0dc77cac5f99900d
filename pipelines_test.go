package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/experiments"
	"github.com/ssfusion/ssfusion/fusion"
	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/nets"
	"github.com/ssfusion/ssfusion/ssfusion"
	"github.com/ssfusion/ssfusion/trainer"
)

func TestPlanningNetwork(t *testing.T) {
	link := func(alpha, beta float64) *netmodel.Network {
		return &netmodel.Network{Inter: netmodel.Link{Alpha: alpha, Beta: beta}}
	}
	emulated := netmodel.Cable{BitsPerSecond: 60e6, Latency: time.Millisecond}.Network()
	for _, tc := range []struct {
		name               string
		alpha, beta        float64
		bandwidth, latency string
		want               *netmodel.Network
		bad                string
	}{
		{"nothing", 0, 0, "", "", nil, ""},
		{"latency alone", 0, 0, "", "1ms", nil, ""},
		{"cost flags", 5.2e-4, 8.6e-10, "", "", link(5.2e-4, 8.6e-10), ""},
		{"cost flags over the emulated link", 0, 1e-9, "60Mbit", "1ms", link(0, 1e-9), ""},
		{"emulated link", 0, 0, "60Mbit", "1ms", &emulated, ""},
		{"alpha alone", 1e-3, 0, "60Mbit", "", nil, "--cost-alpha"},
		{"bad bandwidth", 0, 0, "fast", "", nil, "--bandwidth"},
		{"bad latency", 0, 0, "60Mbit", "soon", nil, "--latency"},
	} {
		cfg := trainer.Defaults()
		cfg.CostAlpha, cfg.CostBeta, cfg.Bandwidth, cfg.Latency = tc.alpha, tc.beta, tc.bandwidth, tc.latency
		got, err := planningNetwork(&cfg)
		switch {
		case tc.bad != "":
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.bad)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want:
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestCheckPipeline: a setting a pipeline refuses is found before any worker starts, with
// an error naming it.
func TestCheckPipeline(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*trainer.Config)
		want string // "" for accepted
	}{
		{"dense", func(c *trainer.Config) {}, ""},
		{"dense without error feedback", func(c *trainer.Config) { c.ErrorFeedback = false }, "error-feedback"},
		{"dense with momentum correction", func(c *trainer.Config) { c.MomentumCorrection = true }, "momentum-correction"},
		{"pertensor without error feedback", func(c *trainer.Config) { c.Pipeline, c.ErrorFeedback = "pertensor", false }, ""},
		{"exdyna without error feedback", func(c *trainer.Config) { c.Pipeline, c.ErrorFeedback = "exdyna", false }, ""},
		{"safusion without error feedback", func(c *trainer.Config) { c.Pipeline, c.ErrorFeedback = "safusion", false }, ""},
		{"pertensor, momentum correction without error feedback", func(c *trainer.Config) {
			c.Pipeline, c.ErrorFeedback, c.MomentumCorrection = "pertensor", false, true
		}, "error feedback"},
		{"ssfusion by rank", func(c *trainer.Config) { c.Pipeline, c.SelectRule = "ssfusion", "rank" }, ""},
		{"ssfusion-naive by cost without a network", func(c *trainer.Config) { c.Pipeline, c.SelectRule = "ssfusion-naive", "cost" }, "select-rule cost"},
		{"ssfusion by cost over an emulated link", func(c *trainer.Config) { c.Pipeline, c.SelectRule, c.Bandwidth = "ssfusion", "cost", "1Gbit" }, ""},
		{"ssfusion by cost with cost flags", func(c *trainer.Config) { c.Pipeline, c.SelectRule, c.CostBeta = "ssfusion", "cost", 8.6e-10 }, ""},
		{"ssfusion, unknown rule", func(c *trainer.Config) { c.Pipeline, c.SelectRule = "ssfusion", "largest" }, "largest"},
		{"unknown pipeline", func(c *trainer.Config) { c.Pipeline = "fastest" }, "fastest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := trainer.Defaults()
			tc.edit(&cfg)
			err := checkPipeline(cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestSparseConfigCarriesErrorFeedback: --error-feedback reaches every sparsifying
// pipeline through the one compress.Config they are all built from.
func TestSparseConfigCarriesErrorFeedback(t *testing.T) {
	for _, on := range []bool{true, false} {
		cfg := trainer.Defaults()
		cfg.ErrorFeedback = on
		if got := sparseConfig(&cfg).NoErrorFeedback; got == on {
			t.Errorf("error-feedback %v: compress.Config.NoErrorFeedback %v", on, got)
		}
	}
}

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
	net, err := planningNetwork(&cfg)
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
	buckets, err := fusion.PlanBuckets(order, func(id int) int { return params[id].Numel() }, fusionBytes(&cfg))
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
