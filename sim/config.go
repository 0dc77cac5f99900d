package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/ssfusion/ssfusion/pipelines"
)

// Config is a sweep as the simulate command describes it: names, sizes and factors as
// its flags give them, not yet parsed. Its errors name each setting by its flag
// (--workers), since what they report is a command line.
type Config struct {
	Profiles []string // shipped models or JSON files, see LoadProfiles
	Speed    float64  // compute speed factor: the profiles' times are divided by it
	// Pipelines, when PipelinesNamed, are the pipelines simulated. Otherwise every
	// pipeline of pipelines.Compared is, but one that cannot build on the profiles and
	// settings.
	Pipelines      []string
	PipelinesNamed bool
	// Settings are the pipelines' options; OptionsSet names the ones the user set, each
	// of which a pipeline simulated must read.
	Settings   pipelines.Settings
	OptionsSet []string
	Workers    []int // worker counts
	Networks   Networks
	// Selection names the selection model (see NamedSelectionModel), whose times are
	// divided by SelectionSpeed.
	Selection      string
	SelectionSpeed float64
	// SelectionCosts, if set, is a file of GPU constants (LoadGPUConstants) from which the
	// gpu model is built instead of the V100's; Selection must then be "gpu".
	SelectionCosts string
	Steps, Warmup  int // see Sweep
	Parallel       int // see Sweep
	// Memory is what the jobs may hold together, e.g. "2GB"; "0": no limit.
	Memory string
	// Tolerance is the validation's largest relative error of a prediction accepted,
	// checked with the rest so that a mistake in it fails before any work starts.
	Tolerance float64
	// LeftOut, if set, is told why each default pipeline left out cannot build.
	LeftOut func(error)
}

// Sweep checks c and returns the sweep it describes. Every pipeline is built once per
// profile and network, on a toy model, so that a setting a pipeline refuses fails now
// rather than after hours of simulation. A default pipeline that cannot build on the
// profiles (PowerSGD needs the tensors' shapes, which older profiles lack) is left out,
// unless it reads an option the user set: then it fails with what the user asked of it.
func (c *Config) Sweep() (*Sweep, error) {
	s, err := c.build()
	if err != nil {
		return nil, err
	}
	if err := s.CheckSettings(); err != nil {
		return nil, err
	}
	if c.PipelinesNamed {
		err = s.Try()
	} else {
		err = c.keepBuildable(s)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// build parses and checks c's settings into a sweep whose pipelines are not yet tried.
func (c *Config) build() (*Sweep, error) {
	profiles, err := LoadProfiles(c.Profiles, c.Speed)
	if err != nil {
		return nil, fmt.Errorf("--profile, --speed: %w", err)
	}
	nets, err := c.Networks.Build()
	if err != nil {
		return nil, fmt.Errorf("network flags: %w", err)
	}
	names := c.pipelineNames()
	if err := c.checkOptionsRead(names); err != nil {
		return nil, err
	}
	if len(profiles) == 0 || len(nets) == 0 || len(names) == 0 || len(c.Workers) == 0 {
		return nil, errors.New("nothing to simulate: --profile, --bandwidth, --pipelines and --workers each need a value")
	}
	for _, w := range c.Workers {
		if w < 1 {
			return nil, fmt.Errorf("--workers: %d is not a worker count", w)
		}
	}
	selection, err := c.selectionModel()
	if err != nil {
		return nil, err
	}
	if !(c.Tolerance >= 0) {
		return nil, fmt.Errorf("--tolerance must be at least 0, got %g", c.Tolerance)
	}
	memory, err := c.memoryLimit()
	if err != nil {
		return nil, err
	}
	return &Sweep{
		Profiles: profiles, Pipelines: names, Workers: c.Workers, Networks: nets, Selection: selection,
		Settings: c.Settings, Steps: c.Steps, Warmup: c.Warmup, Seed: 1, Parallel: c.Parallel, MemoryLimit: memory,
	}, nil
}

// pipelineNames are the pipelines c simulates before any is left out.
func (c *Config) pipelineNames() []string {
	if c.PipelinesNamed {
		return c.Pipelines
	}
	return pipelines.Compared()
}

// checkOptionsRead reports an option the user set that none of names reads: each pipeline
// takes the options it reads, so such an option is a mistake. An unknown pipeline counts
// as reading it, so that its own error is the one reported.
func (c *Config) checkOptionsRead(names []string) error {
	for _, key := range c.OptionsSet {
		if !slices.ContainsFunc(names, func(n string) bool { s, err := pipelines.Lookup(n); return err != nil || s.ReadsKey(key) }) {
			return fmt.Errorf("--%s: none of the pipelines simulated (%s) reads it", key, strings.Join(names, ", "))
		}
	}
	return nil
}

// selectionModel is the selection model c names, at its speed.
func (c *Config) selectionModel() (SelectionModel, error) {
	selection, _, err := NamedSelectionModel(c.Selection)
	if err != nil {
		return SelectionModel{}, fmt.Errorf("--selection: %w", err)
	}
	if c.SelectionCosts != "" {
		if c.Selection != "gpu" {
			return SelectionModel{}, fmt.Errorf("--selection-costs gives a GPU's figures: it goes with --selection gpu, not %s", c.Selection)
		}
		g, err := LoadGPUConstants(c.SelectionCosts)
		if err != nil {
			return SelectionModel{}, fmt.Errorf("--selection-costs: %w", err)
		}
		selection = g.Model()
	}
	if c.SelectionSpeed == 1 {
		return selection, nil
	}
	if !(c.SelectionSpeed > 0) || math.IsInf(c.SelectionSpeed, 0) {
		return SelectionModel{}, fmt.Errorf("--selection-speed must be positive and finite, got %g", c.SelectionSpeed)
	}
	return selection.Scaled(c.SelectionSpeed), nil
}

// memoryLimit is c.Memory in bytes.
func (c *Config) memoryLimit() (int64, error) {
	size, err := humanize.ParseBytes(c.Memory)
	if err != nil || size > math.MaxInt64 {
		return 0, fmt.Errorf("--memory %q: want a size such as 2GB or 512MB", c.Memory)
	}
	return int64(size), nil
}

// keepBuildable leaves out of s the default pipelines that cannot build on its profiles
// and settings, telling c.LeftOut of each, and fails when one of them reads an option the
// user set or when none is left.
func (c *Config) keepBuildable(s *Sweep) error {
	var kept []string
	for _, name := range s.Pipelines {
		if err := s.TryPipeline(name); err != nil {
			if readsAny(name, c.OptionsSet) {
				return err
			}
			if c.LeftOut != nil {
				c.LeftOut(err)
			}
			continue
		}
		kept = append(kept, name)
	}
	if len(kept) == 0 {
		return errors.New("no pipeline can run on these profiles and settings")
	}
	s.Pipelines = kept
	return nil
}

// readsAny reports whether pipeline name reads any of keys.
func readsAny(name string, keys []string) bool {
	spec, err := pipelines.Lookup(name)
	return err == nil && slices.ContainsFunc(keys, spec.ReadsKey)
}

// Setting describes c for a report (Report.Setting): the pipelines' main options, the
// selection model, the steps, the speed factors and each of nets, the sweep's networks.
func (c *Config) Setting(nets []Net) map[string]string {
	_, selection, _ := NamedSelectionModel(c.Selection)
	if c.SelectionCosts != "" {
		device := "?"
		if g, err := LoadGPUConstants(c.SelectionCosts); err == nil {
			device = g.Device
		}
		selection = fmt.Sprintf("gpu, at the figures of %s in %s", device, c.SelectionCosts)
	}
	s := map[string]string{
		"density":   fmt.Sprint(c.Settings.Density),
		"fusion":    fmt.Sprintf("%g MiB", c.Settings.FusionMB),
		"selection": selection,
		"selector":  c.Settings.Selector,
		"steps":     fmt.Sprintf("%d, of which %d warm-up", c.Steps, c.Warmup),
		"speed":     fmt.Sprintf("compute x%g, selection x%g", c.Speed, c.SelectionSpeed),
		"threshold": fmt.Sprintf("select-rule %s, select-threshold %d", c.Settings.SelectRule, c.Settings.SelectThreshold),
	}
	for _, n := range nets {
		s["network "+n.Name] = n.Model.String()
	}
	return s
}

// DefaultMapLatency is a map's start-up per message when --latency is not given: a map
// uses nominal links, never the presets of Networks.Build, so that its latency is one
// constant across the whole grid.
const DefaultMapLatency = 50 * time.Microsecond

// Map checks c and returns the map over axes (one or two of them; y's Name is "" for
// one) that it describes. The constants no axis varies come from c: its one worker count,
// its one bandwidth, its latency (DefaultMapLatency if 0) and its selection model's top-k
// line. named are simulated besides the grid.
func (c *Config) Map(x, y Axis, named []NamedSetting) (*Map, error) {
	varied := func(name string) bool { return x.Name == name || y.Name == name }
	if len(c.Workers) != 1 && !varied("workers") {
		return nil, fmt.Errorf("--workers: a map takes one worker count unless it varies workers, got %d", len(c.Workers))
	}
	if len(c.Networks.Bandwidths) != 1 && !varied("bandwidth") {
		return nil, fmt.Errorf("--bandwidth: a map takes one bandwidth unless it varies bandwidth, got %d", len(c.Networks.Bandwidths))
	}
	one := *c
	one.Workers, one.Networks.Bandwidths = c.Workers[:1], c.Networks.Bandwidths[:1]
	if one.Networks.Latency == 0 {
		one.Networks.Latency = DefaultMapLatency
	}
	s, err := one.Sweep()
	if err != nil {
		return nil, err
	}
	bps, err := parseBandwidth(one.Networks.Bandwidths[0])
	if err != nil {
		return nil, fmt.Errorf("--bandwidth: %w", err)
	}
	top := s.Selection.Kinds["topk"]
	m := &Map{
		Base: s, Network: s.Networks[0].Model, Selection: s.Selection, X: x, Y: y, Named: named,
		Constants: Constants{Workers: c.Workers[0], BitsPerSecond: bps, Latency: one.Networks.Latency,
			SelectCallNS: top.PerCallNS, SelectElementNS: top.PerElementNS},
	}
	if err := m.Check(); err != nil {
		return nil, err
	}
	return m, nil
}
