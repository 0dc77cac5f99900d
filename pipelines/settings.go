package pipelines

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/internal/keys"
)

// Settings are the configuration keys of the gradient pipeline: which pipeline, and the
// options the pipelines read. Each field's mapstructure tag is its flag name, its key in a
// --config file and, upper-cased with SSF_ in front, its environment variable; its usage
// tag is the flag's help; its default is in DefaultSettings. A pipeline says which of
// these it reads (Spec.Reads), and a key it does not read, set away from its default, is
// refused by name (see Check).
type Settings struct {
	Pipeline string  `mapstructure:"pipeline" json:"pipeline" usage:"gradient pipeline (ssf pipelines lists them)"`
	Density  float64 `mapstructure:"density" json:"density" usage:"fraction of gradient elements a sparsifying pipeline sends"`
	FusionMB float64 `mapstructure:"fusion-mb" json:"fusion_mb" usage:"fusion buffer threshold in MB"`
	Selector string  `mapstructure:"selector" json:"selector" usage:"element selector of the sparsifying pipelines that select by a selector"`
	// SelectThreshold and SelectRule are how SSFusion picks the tensors it may sparsify:
	// "size" (at least SelectThreshold elements, pruned by the cost model when there is a
	// planning network), "rank" (the authors' code: 2-D parameters dense, every other
	// tensor sparsified, no threshold or cost model) or "cost" (every tensor a candidate,
	// the cost model alone decides; needs a planning network).
	SelectThreshold int    `mapstructure:"select-threshold" json:"select_threshold" usage:"SSFusion, size rule: tensors with at least this many elements are sparsified"`
	SelectRule      string `mapstructure:"select-rule" json:"select_rule" usage:"SSFusion's choice of the tensors to sparsify: size (at least --select-threshold elements, pruned by the cost model when there is a planning network), rank (the authors' code: 2-D parameters stay dense, every other tensor is sparsified) or cost (every tensor a candidate, the cost model decides; needs --bandwidth or --cost-beta)"`
	SelectWorkers   int    `mapstructure:"select-workers" json:"select_workers" usage:"SSFusion with offloading: goroutines that run offloaded selection"`
	// DensityWarmupSteps is DGC's warm-up: the density falls from 0.25 to Density over
	// these first steps (0: none).
	DensityWarmupSteps int `mapstructure:"density-warmup-steps" json:"density_warmup_steps" usage:"sparsifying pipelines: the density falls from 0.25 to --density over these first steps (DGC's warm-up)"`
	// ExDynaThreshold is how ExDyna's threshold is set: "measured" (estimated in every
	// step from samples the workers share in their allgather) or "paper" (1/(2 sqrt(k))
	// at the start, then steps of half a percent).
	ExDynaThreshold string `mapstructure:"exdyna-threshold" json:"exdyna_threshold" usage:"ExDyna's threshold: measured (estimated in every step from samples shared in the allgather, so the density holds from the first step) or paper (1/(2 sqrt(k)) at first, then steps of half a percent)"`
	// SAFusionAlign is SAFusion's inter-worker alignment: every rank pads its selection
	// of every tensor to k_i pairs, so that a buffer's messages have one length on all
	// ranks. Off, each rank sends what its selector picked, which differs from the aligned
	// run only with a selector that may pick fewer (dgc, gaussiank).
	SAFusionAlign bool `mapstructure:"safusion-align" json:"safusion_align" usage:"SAFusion: pad every rank's selection of every tensor to k_i pairs, so that a buffer's messages have one length on all ranks; --safusion-align=false sends only what the selector picked (differs only with dgc or gaussiank, which may pick fewer)"`
	PowerSGDRank  int  `mapstructure:"powersgd-rank" json:"powersgd_rank" usage:"PowerSGD: rank of the approximation of each matrix-shaped gradient"`
	// PowerSGDWarmupSteps are PowerSGD's first steps, allreduced densely (the DDP hook's
	// start_powerSGD_iter).
	PowerSGDWarmupSteps int `mapstructure:"powersgd-warmup-steps" json:"powersgd_warmup_steps" usage:"PowerSGD: first steps allreduced densely (the DDP hook's start_powerSGD_iter)"`
	// MomentumCorrection moves SGD momentum into a sparsifying pipeline's error-feedback
	// memory (DGC); the optimizer then runs without momentum.
	MomentumCorrection bool `mapstructure:"momentum-correction" json:"momentum_correction" usage:"sparsifying pipelines: apply momentum before selection (DGC); the optimizer then runs without"`
	// ErrorFeedback keeps, in a sparsifying pipeline, what a step does not send and adds
	// it to the next step's gradient; off, it is dropped, as the top-k baselines of the
	// SSFusion authors' code do.
	ErrorFeedback bool `mapstructure:"error-feedback" json:"error_feedback" usage:"sparsifying pipelines: keep what a step does not send and add it to the next step's gradient; --error-feedback=false drops it, as the authors' top-k baselines do (not with --momentum-correction)"`
	// CostAlpha (seconds per message) and CostBeta (seconds per byte) are the link the
	// planners plan with. CostBeta 0 leaves them the emulated link or, without one, no
	// network. SelectNS is the selection cost per element the planners assume.
	CostAlpha float64 `mapstructure:"cost-alpha" json:"cost_alpha" usage:"planners' link (SSFusion's chooser, SAFusion's and OMGS-SGD's buffer sizing): start-up time per message, seconds (e.g. 5.2e-4); needs --cost-beta"`
	CostBeta  float64 `mapstructure:"cost-beta" json:"cost_beta" usage:"planners' link: time per byte, seconds (e.g. 8.6e-10); 0: the emulated link, else none"`
	SelectNS  float64 `mapstructure:"select-ns" json:"select_ns" usage:"planners (SSFusion's chooser, OMGS-SGD): selection time per element, nanoseconds"`
}

// DefaultSettings are the settings of a bare train.
func DefaultSettings() Settings {
	return Settings{
		Pipeline:        "dense",
		Density:         0.01,
		FusionMB:        64,
		Selector:        "topk",
		SelectThreshold: 8192,
		SelectRule:      "size",
		SelectWorkers:   1,
		ExDynaThreshold: "measured",
		SAFusionAlign:   true,
		PowerSGDRank:    2,
		ErrorFeedback:   true,
		SelectNS:        3,
	}
}

// Common are the keys of the sparsifying pipelines that select with a compress.Config.
var Common = []string{"density", "selector", "density-warmup-steps", "momentum-correction", "error-feedback"}

// Keys lists every key of Settings but "pipeline", in field order.
func Keys() []string {
	var out []string
	for _, f := range keys.Fields(DefaultSettings()) {
		if f.Key != "pipeline" {
			out = append(out, f.Key)
		}
	}
	return out
}

// Value returns the value of key; nil for a key Settings lacks.
func (s Settings) Value(key string) any {
	v, _ := s.value(key)
	return v
}

// value returns the value of key, and whether Settings has it.
func (s Settings) value(key string) (any, bool) {
	for _, f := range keys.Fields(s) {
		if f.Key == key {
			return f.Value.Interface(), true
		}
	}
	return nil, false
}

// AddFlags adds a flag per key of Settings to fs, with d's values as defaults.
func AddFlags(fs *pflag.FlagSet, d Settings) { keys.AddFlags(fs, d, FlagUsage()) }

// AddOptionFlags adds a flag per key of Settings but "pipeline" and the keys in except, for
// a command that runs several pipelines with the same options and sets the excepted keys
// itself; FromFlags reads them back.
func AddOptionFlags(fs *pflag.FlagSet, d Settings, except ...string) {
	keys.AddFlags(fs, d, FlagUsage(), append(except, "pipeline")...)
}

// FlagUsage is the help of the flags whose help lists what is known only at run time:
// the registered pipelines and the selectors.
func FlagUsage() map[string]string {
	return map[string]string{
		"pipeline": "gradient pipeline: " + strings.Join(Names(), ", "),
		"selector": Usage("selector") + ": " + strings.Join(compress.SelectorNames(), ", "),
	}
}

// FromFlags returns base with the value of every flag fs holds for a key of Settings.
func FromFlags(fs *pflag.FlagSet, base Settings) (Settings, error) {
	err := keys.FromFlags(fs, &base)
	return base, err
}

// Usage is the help of key, "" for a key Settings lacks.
func Usage(key string) string {
	for _, f := range keys.Fields(Settings{}) {
		if f.Key == key {
			return f.Usage
		}
	}
	return ""
}

// Validate reports every value no pipeline can run with, by key. It does not look at the
// pipeline itself: Check does.
func (s Settings) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !(s.Density > 0 && s.Density <= 1) {
		bad("density must be in (0, 1], got %g", s.Density)
	}
	if !(s.FusionMB > 0) {
		bad("fusion-mb must be positive, got %g", s.FusionMB)
	}
	if _, err := compress.NewSelector(s.Selector, 0); err != nil {
		bad("selector: %v", err)
	}
	if s.SelectThreshold < 0 {
		bad("select-threshold must not be negative, got %d", s.SelectThreshold)
	}
	if s.SelectWorkers < 1 {
		bad("select-workers must be at least 1, got %d", s.SelectWorkers)
	}
	if s.DensityWarmupSteps < 0 {
		bad("density-warmup-steps must not be negative, got %d", s.DensityWarmupSteps)
	}
	if s.PowerSGDRank < 1 {
		bad("powersgd-rank must be at least 1, got %d", s.PowerSGDRank)
	}
	if s.PowerSGDWarmupSteps < 0 {
		bad("powersgd-warmup-steps must not be negative, got %d", s.PowerSGDWarmupSteps)
	}
	if s.CostAlpha < 0 || s.CostBeta < 0 || s.SelectNS < 0 {
		bad("cost-alpha, cost-beta and select-ns must not be negative, got %g, %g, %g", s.CostAlpha, s.CostBeta, s.SelectNS)
	}
	if s.MomentumCorrection && !s.ErrorFeedback {
		bad("momentum-correction keeps its momentum in the error-feedback memory: it needs error-feedback on")
	}
	return errors.Join(errs...)
}

// For returns s for the pipeline called name: s with that pipeline, and with every key the
// pipeline does not read at its default, but for the keys in keep. Settings shared by
// several pipelines (an experiment's base, a simulation's flags) are given to each this
// way; a key in keep that the pipeline does not read is then still refused by Check.
func (s Settings) For(name string, keep ...string) (Settings, error) {
	spec, err := Lookup(name)
	if err != nil {
		return Settings{}, err
	}
	s.Pipeline = name
	d := keys.Fields(DefaultSettings())
	for i, f := range keys.Fields(&s) {
		if !spec.ReadsKey(f.Key) && !slices.Contains(keep, f.Key) {
			f.Value.Set(d[i].Value)
		}
	}
	return s, nil
}
