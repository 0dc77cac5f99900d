// Package pipelines is the registry of gradient pipelines. Each pipeline joins it once,
// from an init function beside its code, with its name, a one-line description, the
// configuration keys it reads and its constructor; training, the simulator, the commands
// and the conformance tests build pipelines only through it, as database/sql opens
// connections only through the drivers registered with it. It also owns the pipeline's
// configuration keys (Settings): their defaults, flags, help and validation.
//
// A program gets the shipped pipelines by importing the packages that register them,
// usually for their side effect alone:
//
//	import (
//		_ "github.com/ssfusion/ssfusion/baselines"
//		_ "github.com/ssfusion/ssfusion/ssfusion"
//	)
package pipelines

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
)

// Spec is what a pipeline registers.
type Spec struct {
	// Name is the value of --pipeline that picks it: lower case, no spaces.
	Name string
	// Description says in one line what the pipeline does.
	Description string
	// Reads are the keys of Settings the pipeline reads, beyond "pipeline". A key it does
	// not read, set away from its default, is refused, so that a setting never goes
	// silently unused.
	Reads []string
	// Check refuses settings the pipeline cannot run with, beyond the ranges that
	// Settings.Validate checks for every pipeline; nil when there are none.
	Check func(Settings) error
	// New builds one rank's pipeline. Every rank of a job calls it with the same
	// settings, and their pipelines must issue the same collectives in the same order.
	New func(Build) (pipeline.Pipeline, error)
	// Ablation marks a variant of another pipeline that takes one of its parts away;
	// lists of the pipelines to compare (Compared) leave it out.
	Ablation bool
	// Tolerance is how far, as a fraction of the target, the density a step achieves
	// may stray from the density the pipeline aims at; 0 for a pipeline that reports no
	// density. The conformance tests hold every pipeline to it.
	Tolerance float64
}

// ReadsKey reports whether the pipeline reads key ("pipeline" always).
func (s Spec) ReadsKey(key string) bool { return key == "pipeline" || slices.Contains(s.Reads, key) }

// Build is everything a pipeline is built from.
type Build struct {
	Settings Settings
	// Seed seeds randomised selectors and projections; rank r adds r where its draws
	// must differ from the other ranks'.
	Seed uint64
	// Momentum is the optimizer's SGD momentum, which momentum correction moves into the
	// pipeline.
	Momentum float64
	// Network is the network the planners plan with (SSFusion's choice of the tensors
	// to sparsify, SAFusion's and OMGS-SGD's buffer sizing); nil for none.
	Network *netmodel.Network
	// Comm connects the ranks; a single process gets a one-rank communicator, so that
	// selection and error feedback apply there too.
	Comm    dist.Communicator
	Tensors []pipeline.Tensor
}

// FusionBytes is the fusion buffer threshold in bytes.
func (b Build) FusionBytes() int { return int(b.Settings.FusionMB * (1 << 20)) }

// Sparse is the compress.Config of a sparsifying pipeline.
func (b Build) Sparse() compress.Config {
	s := b.Settings
	c := compress.Config{Density: s.Density, Selector: s.Selector, Seed: b.Seed, WarmupSteps: s.DensityWarmupSteps,
		NoErrorFeedback: !s.ErrorFeedback}
	if s.MomentumCorrection {
		c.Momentum = b.Momentum
	}
	return c
}

// registry holds the registered pipelines. It is the one package-level variable here,
// for the reason database/sql keeps its drivers in one: packages join it from init.
var registry = struct {
	sync.RWMutex
	specs map[string]Spec
}{specs: map[string]Spec{}}

// Register adds a pipeline. It panics, as database/sql.Register does, when the spec is
// incomplete, reads a key Settings lacks, or takes a name already taken: each is a
// programming error found at start-up.
func Register(s Spec) {
	if s.Name == "" || s.Name != strings.ToLower(strings.TrimSpace(s.Name)) || strings.ContainsAny(s.Name, " \t,") {
		panic(fmt.Sprintf("pipelines: Register of %q: a name is lower case, without spaces or commas", s.Name))
	}
	if s.New == nil || s.Description == "" {
		panic(fmt.Sprintf("pipelines: Register of %s without a constructor or a description", s.Name))
	}
	for _, k := range s.Reads {
		if !slices.Contains(Keys(), k) {
			panic(fmt.Sprintf("pipelines: %s reads %q, which is not a key of Settings", s.Name, k))
		}
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.specs[s.Name]; dup {
		panic(fmt.Sprintf("pipelines: Register called twice for %s", s.Name))
	}
	registry.specs[s.Name] = s
}

// Unregister removes a pipeline; tests that register one of their own use it to clean
// up.
func Unregister(name string) {
	registry.Lock()
	defer registry.Unlock()
	delete(registry.specs, name)
}

// Names lists the registered pipelines, sorted.
func Names() []string {
	registry.RLock()
	defer registry.RUnlock()
	names := make([]string, 0, len(registry.specs))
	for n := range registry.specs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Compared lists the registered pipelines but the ablations, sorted: the pipelines a
// comparison runs unless told which.
func Compared() []string {
	var out []string
	for _, s := range Specs() {
		if !s.Ablation {
			out = append(out, s.Name)
		}
	}
	return out
}

// Specs returns the registered pipelines, sorted by name.
func Specs() []Spec {
	var out []Spec
	for _, n := range Names() {
		s, _ := Lookup(n)
		out = append(out, s)
	}
	return out
}

// Lookup returns the pipeline called name.
func Lookup(name string) (Spec, error) {
	registry.RLock()
	s, ok := registry.specs[name]
	registry.RUnlock()
	if !ok {
		return Spec{}, fmt.Errorf("unknown pipeline %q (available: %s)", name, strings.Join(Names(), ", "))
	}
	return s, nil
}

// Check reports every reason why the pipeline s names cannot run with s: an unknown
// pipeline, a value out of range, a key the pipeline does not read set away from its
// default, and what the pipeline's own Check refuses.
func Check(s Settings) error {
	spec, err := Lookup(s.Pipeline)
	if err != nil {
		return err
	}
	errs := []error{s.Validate()}
	errs = append(errs, Unread(spec, s)...)
	if spec.Check != nil {
		if err := spec.Check(s); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Unread lists the keys set away from their defaults that spec does not read, one error
// each, naming the key, its value and the pipelines that do read it.
func Unread(spec Spec, s Settings) []error {
	var errs []error
	d := DefaultSettings()
	for _, key := range Keys() {
		if spec.ReadsKey(key) {
			continue
		}
		v, _ := s.value(key)
		dv, _ := d.value(key)
		if reflect.DeepEqual(v, dv) {
			continue
		}
		var readers []string
		for _, o := range Specs() {
			if o.ReadsKey(key) {
				readers = append(readers, o.Name)
			}
		}
		errs = append(errs, fmt.Errorf("%s is %v, but pipeline %s does not read %s: leave it at its default (%v); %s",
			key, v, spec.Name, key, dv, readersText(readers)))
	}
	return errs
}

func readersText(readers []string) string {
	if len(readers) == 0 {
		return "no registered pipeline reads it"
	}
	return "it is read by " + strings.Join(readers, ", ")
}

// New checks b.Settings (see Check) and builds one rank's pipeline of the pipeline they
// name.
func New(b Build) (pipeline.Pipeline, error) {
	if err := Check(b.Settings); err != nil {
		return nil, err
	}
	spec, _ := Lookup(b.Settings.Pipeline)
	p, err := spec.New(b)
	if err != nil {
		return nil, fmt.Errorf("pipeline %s: %w", spec.Name, err)
	}
	return p, nil
}

// Factory is b as a pipeline.Factory: each call builds one rank's pipeline with b's
// settings on the communicator and tensors it is given.
func Factory(b Build) pipeline.Factory {
	return func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		b := b
		b.Comm, b.Tensors = comm, tensors
		return New(b)
	}
}
