package experiments

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Pair is a test between two kinds of group that the comparison against the reference does
// not make: every group whose axis values match Group is tested against the one group
// that matches Against and agrees with it on every other axis, at the comparison's margin.
// Values are as they read in the cells' folder names.
//
//	pairs:
//	  - {group: {pipeline: multitensor}, against: {pipeline: pertensor}}
//	  - {group: {pipeline: ssfusion, sparsity: d0.01}, against: {pipeline: pertensor, sparsity: ssfusion-traffic-0.01}}
type Pair struct {
	Group, Against map[string]string
}

func parsePairs(n *yaml.Node) ([]Pair, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("line %d: pairs: want a list of {group: {AXIS: VALUE}, against: {AXIS: VALUE}}", n.Line)
	}
	pairs := make([]Pair, len(n.Content))
	for i, item := range n.Content {
		for j := 0; item.Kind == yaml.MappingNode && j < len(item.Content); j += 2 {
			if k := item.Content[j].Value; k != "group" && k != "against" {
				return nil, fmt.Errorf("line %d: pairs: unknown key %q (want group, against)", item.Content[j].Line, k)
			}
		}
		var raw struct {
			Group   map[string]string `yaml:"group"`
			Against map[string]string `yaml:"against"`
		}
		if err := item.Decode(&raw); err != nil {
			return nil, fmt.Errorf("line %d: pairs: want {group: {AXIS: VALUE}, against: {AXIS: VALUE}}: %w", item.Line, err)
		}
		if len(raw.Group) == 0 || len(raw.Against) == 0 {
			return nil, fmt.Errorf("line %d: pairs: name both the group and what it is tested against, each by one axis value at least", item.Line)
		}
		pairs[i] = Pair{Group: raw.Group, Against: raw.Against}
	}
	return pairs, nil
}

// check refuses a pair that names an axis the matrix lacks, a value its axis lacks, or
// the same groups on both sides.
func (p Pair) check(axes []Axis) error {
	for _, side := range []map[string]string{p.Group, p.Against} {
		for _, key := range slices.Sorted(maps.Keys(side)) {
			i := slices.IndexFunc(axes, func(a Axis) bool { return a.Key == key })
			switch {
			case i < 0 || key == seedKey:
				return fmt.Errorf("pair %s: %s is not an axis of the matrix that groups vary over", p, key)
			case !slices.Contains(axes[i].folders(), side[key]):
				return fmt.Errorf("pair %s: the axis %s has no value %s (it has %s)", p, key, side[key], strings.Join(axes[i].folders(), ", "))
			}
		}
	}
	if maps.Equal(p.Group, p.Against) {
		return fmt.Errorf("pair %s: a group tested against itself", p)
	}
	return nil
}

func (p Pair) String() string {
	return settingText(p.Group) + " against " + settingText(p.Against)
}

// settingText writes axis values as KEY=VALUE, by key.
func settingText(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

// pairRow is one test of a pair: a group against its counterpart.
type pairRow struct {
	group, against string
	a, b           sample
	diff           *difference
	problem        string // why there is no test, when there is none
}

// pairTests makes every test the comparison's pairs name, pair by pair, in the groups'
// order.
func pairTests(spec *Spec, groups []*group) []pairRow {
	figure := spec.Compare.value(groups[0].all[0].cell.Config.IsLanguageModel())
	var rows []pairRow
	for _, p := range spec.Compare.Pairs {
		for _, g := range groups {
			if !g.matches(spec, p.Group) {
				continue
			}
			row := pairRow{group: g.name, a: newSample(g.values(figure))}
			want := g.settingWith(spec, p.Against)
			i := slices.IndexFunc(groups, func(h *group) bool { return h.matches(spec, want) })
			switch {
			case i < 0:
				row.problem = "no group " + settingText(want)
			case groups[i] == g:
				row.problem = "the group itself"
			}
			if row.problem != "" {
				rows = append(rows, row)
				continue
			}
			row.against, row.b = groups[i].name, newSample(groups[i].values(figure))
			if d, err := compareSamples(row.a, row.b, spec.Compare.marginAgainst(row.b)); err != nil {
				row.problem = err.Error()
			} else {
				row.diff = &d
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// matches tells whether the group has every axis value in setting.
func (g *group) matches(spec *Spec, setting map[string]string) bool {
	for _, a := range spec.Matrix {
		if v, ok := setting[a.Key]; ok && axisValue(a, g.all[0].cell) != v {
			return false
		}
	}
	return true
}

// settingWith is the group's value on every axis but seed, with those of change instead.
func (g *group) settingWith(spec *Spec, change map[string]string) map[string]string {
	out := map[string]string{}
	for _, a := range spec.Matrix {
		if a.Key != seedKey {
			out[a.Key] = axisValue(a, g.all[0].cell)
		}
	}
	maps.Copy(out, change)
	return out
}

// writePairs writes the pairs' tests after the comparison against the reference.
func writePairs(b *strings.Builder, spec *Spec, rows []pairRow, lm bool) {
	if len(spec.Compare.Pairs) == 0 {
		return
	}
	what, _, margin := spec.Compare.words(lm)
	b.WriteString("## Pairs\n\n")
	fmt.Fprintf(b, "The tests between groups that this experiment names besides the reference: each group's %s against that of the group on its right, the same tests at the same margin (±%s). \"lower\" means the left group's is lower.\n\n", what, margin)
	b.WriteString("| group | against | seeds | difference [95% CI] | p (Welch) | p (equivalence) | verdict |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(b, "| %s | %s | %d, %d |%s\n", r.group, r.against, len(r.a.xs), len(r.b.xs), testCells(r.diff, r.problem))
	}
	b.WriteString("\nThe same figures, unrounded, are in pairs.csv.\n\n")
}

// pairsCSV is the pairs' tests as a table for other tools, one row a test, named
// "GROUP vs AGAINST" in its first column.
func pairsCSV(rows []pairRow, margin float64) []byte {
	var b strings.Builder
	w := csv.NewWriter(&b)
	w.Write([]string{"pair", "group", "against", "seeds", "mean", "against_seeds", "against_mean", "difference", "difference_low", "difference_high", "p", "p_equivalence", "margin", "verdict"})
	for _, r := range rows {
		rec := []string{r.group + " vs " + r.against, r.group, r.against, strconv.Itoa(len(r.a.xs)), csvNumber(r.a.mean), strconv.Itoa(len(r.b.xs)), csvNumber(r.b.mean)}
		test := r.diff.csvFields()
		w.Write(append(append(rec, test[:5]...), csvNumber(margin), cmp.Or(test[5], r.problem)))
	}
	w.Flush()
	return []byte(b.String())
}
