package sim

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/profile"
)

// selectionModels are the selection-time models by name, with what each stands for.
var selectionModels = map[string]struct {
	model       func() SelectionModel
	description string
}{
	"cpu": {DefaultSelectionModel, "our selectors on this machine's CPU (sim.DefaultSelectionModel)"},
	"gpu": {GPUSelectionModel, "the papers' PyTorch selectors on a V100, from published figures and stated estimates (sim.GPUSelectionModel)"},
}

// SelectionModelNames lists the selection models' names, sorted.
func SelectionModelNames() []string { return slices.Sorted(maps.Keys(selectionModels)) }

// NamedSelectionModel returns the selection model called name and what it stands for.
func NamedSelectionModel(name string) (SelectionModel, string, error) {
	m, ok := selectionModels[name]
	if !ok {
		return SelectionModel{}, "", fmt.Errorf("unknown selection model %q: want %s", name, strings.Join(SelectionModelNames(), " or "))
	}
	return m.model(), name + ": " + m.description, nil
}

// Networks describes the networks of a sweep: one per inter-node bandwidth, the rest
// shared.
type Networks struct {
	Bandwidths []string      // between nodes, e.g. "10Gbit"
	Latency    time.Duration // per message between nodes; 0: the preset's, or 50µs
	AllReduce  string        // algorithm, see netmodel.ParseAlgorithm
	PerNode    int           // ranks per node; above 1, collectives are hierarchical
	// IntraBandwidth and IntraLatency are the links inside a node (PerNode > 1).
	IntraBandwidth string
	IntraLatency   time.Duration
}

// Build returns one network per bandwidth. At 10 and 56 Gbit/s, unless a latency is
// given, the links take the constants found in SAFusion's code; other bandwidths take
// beta = 8/bandwidth and alpha = Latency, 50µs by default.
func (n Networks) Build() ([]Net, error) {
	alg, err := netmodel.ParseAlgorithm(n.AllReduce)
	if err != nil {
		return nil, fmt.Errorf("allreduce: %w", err)
	}
	var intra netmodel.Link
	if n.PerNode > 1 {
		c, err := netmodel.ParseCable(n.IntraBandwidth, n.IntraLatency.String())
		switch {
		case err != nil:
			return nil, fmt.Errorf("intra-node link (intra-bandwidth %q, intra-latency %v): %w", n.IntraBandwidth, n.IntraLatency, err)
		case !c.Shaped():
			return nil, fmt.Errorf("intra-node bandwidth %q: want a positive rate such as 300Gbit", n.IntraBandwidth)
		}
		intra = c.Link()
	}
	var nets []Net
	for _, b := range n.Bandwidths {
		c, err := netmodel.ParseCable(b, n.Latency.String())
		switch {
		case err != nil:
			return nil, fmt.Errorf("link (bandwidth %q, latency %v): %w", b, n.Latency, err)
		case !c.Shaped():
			return nil, fmt.Errorf("bandwidth %q: want a positive rate such as 10Gbit", b)
		}
		inter, preset := netmodel.NetworkPreset(c.BitsPerSecond)
		if !preset || c.Latency > 0 {
			if c.Latency == 0 {
				c.Latency = 50 * time.Microsecond
			}
			inter = c.Link()
		}
		model := netmodel.Network{Inter: inter, Intra: intra, PerNode: n.PerNode, AllReduceAlg: alg}
		if err := model.Check(); err != nil {
			return nil, fmt.Errorf("network at %s: %w", b, err)
		}
		nets = append(nets, Net{Name: b, Model: model})
	}
	return nets, nil
}

// LoadProfiles reads each of names, a shipped model or a JSON file, with its compute
// times divided by speed.
func LoadProfiles(names []string, speed float64) ([]*profile.Profile, error) {
	var out []*profile.Profile
	for _, name := range names {
		var p *profile.Profile
		var err error
		if strings.HasSuffix(name, ".json") || strings.ContainsRune(name, os.PathSeparator) {
			p, err = profile.Load(name)
		} else if p, err = profile.Builtin(name); err != nil {
			err = fmt.Errorf("profile %s: not a shipped model (%s) nor a .json file: %w", name, strings.Join(profile.Architectures(), ", "), err)
		}
		if err != nil {
			return nil, err
		}
		if p, err = p.Scaled(speed); err != nil {
			return nil, fmt.Errorf("speed: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}
