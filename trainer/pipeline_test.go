package trainer

import (
	"strings"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/internal/keys"
	"github.com/ssfusion/ssfusion/netmodel"
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
		cfg := Defaults()
		cfg.CostAlpha, cfg.CostBeta, cfg.Bandwidth, cfg.Latency = tc.alpha, tc.beta, tc.bandwidth, tc.latency
		got, err := PlanningNetwork(&cfg)
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
		edit func(*Config)
		want string // "" for accepted
	}{
		{"dense", func(c *Config) {}, ""},
		{"dense without error feedback", func(c *Config) { c.ErrorFeedback = false }, "pipeline dense does not read error-feedback"},
		{"dense with momentum correction", func(c *Config) { c.MomentumCorrection = true }, "pipeline dense does not read momentum-correction"},
		{"exdyna with a selector", func(c *Config) { c.Pipeline, c.Selector = "exdyna", "gaussiank" }, "pipeline exdyna does not read selector"},
		{"oktopk with a selector", func(c *Config) { c.Pipeline, c.Selector = "oktopk", "dgc" }, "pipeline oktopk does not read selector"},
		{"spardl with a selector", func(c *Config) { c.Pipeline, c.Selector = "spardl", "randomk" }, "pipeline spardl does not read selector"},
		{"powersgd with a selector", func(c *Config) { c.Pipeline, c.Selector = "powersgd", "dgc" }, "pipeline powersgd does not read selector"},
		{"powersgd with a density", func(c *Config) { c.Pipeline, c.Density = "powersgd", 0.05 }, "pipeline powersgd does not read density"},
		{"pertensor with a select rule", func(c *Config) { c.Pipeline, c.SelectRule = "pertensor", "rank" }, "pipeline pertensor does not read select-rule"},
		{"pertensor without error feedback", func(c *Config) { c.Pipeline, c.ErrorFeedback = "pertensor", false }, ""},
		{"exdyna without error feedback", func(c *Config) { c.Pipeline, c.ErrorFeedback = "exdyna", false }, ""},
		{"safusion without error feedback", func(c *Config) { c.Pipeline, c.ErrorFeedback = "safusion", false }, ""},
		{"pertensor, momentum correction without error feedback", func(c *Config) {
			c.Pipeline, c.ErrorFeedback, c.MomentumCorrection = "pertensor", false, true
		}, "it needs error-feedback on"},
		{"ssfusion by rank", func(c *Config) { c.Pipeline, c.SelectRule = "ssfusion", "rank" }, ""},
		{"ssfusion-naive by cost without a network", func(c *Config) { c.Pipeline, c.SelectRule = "ssfusion-naive", "cost" }, "select-rule cost"},
		{"ssfusion by cost over an emulated link", func(c *Config) { c.Pipeline, c.SelectRule, c.Bandwidth = "ssfusion", "cost", "1Gbit" }, ""},
		{"ssfusion by cost with cost flags", func(c *Config) { c.Pipeline, c.SelectRule, c.CostBeta = "ssfusion", "cost", 8.6e-10 }, ""},
		{"ssfusion, unknown rule", func(c *Config) { c.Pipeline, c.SelectRule = "ssfusion", "largest" }, "largest"},
		{"unknown pipeline", func(c *Config) { c.Pipeline = "fastest" }, "fastest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Defaults()
			tc.edit(&cfg)
			err := CheckPipeline(cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestEveryKeyHasHelp: every configuration key carries the help its flag shows.
func TestEveryKeyHasHelp(t *testing.T) {
	for _, f := range keys.Fields(Defaults()) {
		if f.Usage == "" {
			t.Errorf("key %s has no usage tag", f.Key)
		}
	}
}
