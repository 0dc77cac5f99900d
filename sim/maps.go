package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/profile"
)

// The pipeline a map measures the others against, and the one that sends everything.
const (
	mapSubject = "ssfusion"
	mapDense   = "dense"
)

// A Map sweeps one or two hardware constants over a grid: at every point, every pipeline
// of Base is simulated at the Base constants with the axes' values put in. It answers
// where SSFusion's gain over the others changes sign, which no single setting can.
type Map struct {
	// Base gives the profiles, pipelines, settings, steps and parallelism; each point
	// replaces its workers, network and selection model.
	Base *Sweep
	// Network is the network of every point but its inter-node link, which the point's
	// bandwidth and latency make (netmodel.LinkFor: nominal links, never the presets).
	Network netmodel.Network
	// Selection is the selection model whose top-k line each point moves (see
	// SelectionModel.WithTopK).
	Selection SelectionModel
	Constants Constants // the constants no axis varies
	X, Y      Axis      // Y.Name is "" for a map of one constant
	// Named are settings simulated besides the grid, each at its own constants and with
	// its own selection model's shape (see NamedSetting).
	Named []NamedSetting
	// Progress, if set, is told after each point Run simulates, with how many it has
	// simulated of the Missing ones; calls do not overlap.
	Progress func(done, total int, point string)
	// Revision is the source revision of the program simulating, recorded in each point it
	// simulates, so that a map resumed by another build says so.
	Revision string
}

// A MapPoint is every pipeline's prediction at one point of a map.
type MapPoint struct {
	Model string `json:"model"`
	// Setting names the NamedSetting the point simulates; "" for a point of the grid.
	Setting   string    `json:"setting,omitempty"`
	X         float64   `json:"x"`
	Y         float64   `json:"y"`
	Constants Constants `json:"constants"`
	Pipelines []Point   `json:"pipelines"`
	// Seconds is the wall-clock time the point took to simulate.
	Seconds float64 `json:"seconds"`
	// Revision is the source revision that simulated the point; "" when not recorded.
	Revision string `json:"revision,omitempty"`
}

// Check reports what makes m impossible to run, before any point is simulated.
func (m *Map) Check() error {
	if m.X.Name == "" {
		return errors.New("a map needs at least one axis (--vary)")
	}
	if m.X.Name == m.Y.Name {
		return fmt.Errorf("--vary names %s twice", m.X.Name)
	}
	if !slices.Contains(m.Base.Pipelines, mapSubject) || len(m.Base.Pipelines) < 2 {
		return fmt.Errorf("a map compares %s with other pipelines: --pipelines must name it and at least one other (got %s)",
			mapSubject, strings.Join(m.Base.Pipelines, ","))
	}
	top, ok := m.Selection.Kinds["topk"]
	if !ok || !(top.PerCallNS > 0) || !(top.PerElementNS > 0) {
		return errors.New("the selection model needs a top-k line with positive costs per call and per element")
	}
	for _, n := range m.Named {
		if _, _, err := NamedSelectionModel(n.Selection); err != nil {
			return fmt.Errorf("named setting %s: %w", n.Name, err)
		}
	}
	for _, p := range m.points() {
		c := p.Constants
		if c.Workers < 1 || !(c.BitsPerSecond > 0) || c.Latency <= 0 || !(c.SelectCallNS > 0) || !(c.SelectElementNS > 0) {
			return fmt.Errorf("constants %+v: every one must be positive (give --latency)", c)
		}
		if err := m.network(c).Check(); err != nil {
			return fmt.Errorf("network at %s: %w", FormatBandwidth(c.BitsPerSecond), err)
		}
	}
	return nil
}

// Size is the number of points: profiles times the grid's cells, and the named settings.
func (m *Map) Size() int { return len(m.points()) }

// Missing is the number of m's points that done lacks: what Run will simulate.
func (m *Map) Missing(done []MapPoint) int {
	n := 0
	for _, p := range m.points() {
		if !slices.ContainsFunc(done, p.same) {
			n++
		}
	}
	return n
}

// points are the map's points without predictions, in the order Run fills them: profile,
// then Y, then X.
func (m *Map) points() []MapPoint {
	ys := []float64{0}
	if m.Y.Name != "" {
		ys = m.Y.Values
	}
	var out []MapPoint
	for _, prof := range m.Base.Profiles {
		for _, y := range ys {
			for _, x := range m.X.Values {
				c := m.X.set(m.Constants, x)
				if m.Y.Name != "" {
					c = m.Y.set(c, y)
				}
				out = append(out, MapPoint{Model: prof.Model, X: x, Y: y, Constants: c})
			}
		}
		for _, n := range m.Named {
			out = append(out, MapPoint{Model: prof.Model, Setting: n.Name, X: m.X.Of(n.Constants), Y: m.Y.of(n.Constants), Constants: n.Constants})
		}
	}
	return out
}

// network is m's network with the inter-node link of c.
func (m *Map) network(c Constants) netmodel.Network {
	n := m.Network
	n.Inter = netmodel.LinkFor(c.BitsPerSecond, c.Latency)
	return n
}

// sweepAt is the sweep of one point: one profile, one scale, one network, one selection
// model.
func (m *Map) sweepAt(p MapPoint) *Sweep {
	s := *m.Base
	s.Profiles = slices.DeleteFunc(slices.Clone(m.Base.Profiles), func(q *profile.Profile) bool { return q.Model != p.Model })
	s.Workers = []int{p.Constants.Workers}
	s.Networks = []Net{{Name: FormatBandwidth(p.Constants.BitsPerSecond), Model: m.network(p.Constants)}}
	s.Selection = m.selectionAt(p).WithTopK(p.Constants.SelectCallNS, p.Constants.SelectElementNS)
	s.Progress = nil
	return &s
}

// selectionAt is the selection model whose top-k line p moves: a named setting's own, or
// the map's.
func (m *Map) selectionAt(p MapPoint) SelectionModel {
	for _, n := range m.Named {
		if n.Name == p.Setting {
			model, _, err := NamedSelectionModel(n.Selection)
			if err == nil {
				return model
			}
		}
	}
	return m.Selection
}

// Run simulates every point that done lacks and returns all of them in order. done holds
// points of an earlier, interrupted run of the same map, found by model, named setting and
// constants (MapPoint.same);
// save, if set, is given every point so far after each new one, so that an interruption
// loses at most the point under way. Cancelling ctx stops the running jobs.
func (m *Map) Run(ctx context.Context, done []MapPoint, save func([]MapPoint) error) ([]MapPoint, error) {
	if err := m.Check(); err != nil {
		return nil, err
	}
	all, simulated, missing := m.points(), 0, m.Missing(done)
	for i, p := range all {
		if j := slices.IndexFunc(done, p.same); j >= 0 {
			all[i] = done[j]
			continue
		}
		start := time.Now()
		points, err := m.sweepAt(p).Run(ctx)
		if err != nil {
			return nil, fmt.Errorf("map point %s: %w", m.describe(p), err)
		}
		all[i].Pipelines, all[i].Seconds, all[i].Revision = points, time.Since(start).Seconds(), m.Revision
		if save != nil {
			if err := save(finished(all)); err != nil {
				return nil, err
			}
		}
		simulated++
		if m.Progress != nil {
			m.Progress(simulated, missing, m.describe(p))
		}
	}
	return all, nil
}

// same reports whether p and q are the same point of a map.
func (p MapPoint) same(q MapPoint) bool {
	return p.Model == q.Model && p.Setting == q.Setting && p.Constants == q.Constants
}

// finished are the points of all with predictions.
func finished(all []MapPoint) []MapPoint {
	var out []MapPoint
	for _, p := range all {
		if p.Pipelines != nil {
			out = append(out, p)
		}
	}
	return out
}

// describe names a point by its model and axis values.
func (m *Map) describe(p MapPoint) string {
	if p.Setting != "" {
		return p.Model + ", " + p.Setting
	}
	s := fmt.Sprintf("%s, %s %s", p.Model, m.X.Name, m.X.Format(p.X))
	if m.Y.Name != "" {
		s += fmt.Sprintf(", %s %s", m.Y.Name, m.Y.Format(p.Y))
	}
	return s
}

// A Gain compares SSFusion's predicted step at one point with the others'.
type Gain struct {
	Model      string
	X, Y       float64
	SSFusionMS float64
	// Best is the fastest of the pipelines compared (by default every one but SSFusion and
	// dense), and OverBest SSFusion's throughput gain over it: BestMS / SSFusionMS - 1.
	Best     string
	BestMS   float64
	OverBest float64
	// OverDense is the gain over dense; NaN when the map has no dense.
	DenseMS   float64
	OverDense float64
	Fastest   string // of every pipeline, SSFusion and dense included
}

// Gain returns p's gain over the fastest of every other pipeline but dense. It fails when
// SSFusion or every other pipeline is missing.
func (p MapPoint) Gain() (Gain, error) { return p.GainAgainst(nil) }

// GainAgainst is Gain over the fastest of against; nil means every pipeline but SSFusion
// and dense.
func (p MapPoint) GainAgainst(against []string) (Gain, error) {
	g := Gain{Model: p.Model, X: p.X, Y: p.Y, OverDense: math.NaN(), DenseMS: math.NaN()}
	fastest := math.Inf(1)
	for _, q := range p.Pipelines {
		ms := q.IterationMS
		if ms < fastest {
			fastest, g.Fastest = ms, q.Pipeline
		}
		switch q.Pipeline {
		case mapSubject:
			g.SSFusionMS = ms
		case mapDense:
			g.DenseMS = ms
		}
		if compared(q.Pipeline, against) && (g.Best == "" || ms < g.BestMS) {
			g.Best, g.BestMS = q.Pipeline, ms
		}
	}
	if !(g.SSFusionMS > 0) || g.Best == "" {
		return Gain{}, fmt.Errorf("point %s at %g, %g: a gain needs %s and a pipeline to compare it with", p.Model, p.X, p.Y, mapSubject)
	}
	g.OverBest = g.BestMS/g.SSFusionMS - 1
	if g.DenseMS > 0 {
		g.OverDense = g.DenseMS/g.SSFusionMS - 1
	}
	return g, nil
}

// compared reports whether a gain against the pipelines against (nil: every one but
// SSFusion and dense) compares SSFusion with pipeline name.
func compared(name string, against []string) bool {
	if against == nil {
		return name != mapSubject && name != mapDense
	}
	return slices.Contains(against, name)
}
