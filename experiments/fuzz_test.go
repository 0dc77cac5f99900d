package experiments

import (
	"path/filepath"
	"testing"
)

// FuzzExpand: whatever the experiment file, parsing and expansion either fail with an
// error or give cells with distinct names, each writing inside the experiment's folder
// under the results root.
func FuzzExpand(f *testing.F) {
	for _, seed := range []string{
		"name: e\nmatrix: {pipeline: [dense, ssfusion], workers: [2, 4]}",
		"name: e\nbase: {model: mlp, max-steps: 3}\nmatrix: {density: [0.01, 0.1]}",
		"matrix: {milestones: [[30, 60]], bandwidth: [60Mbit, 1Gbit]}",
		`matrix: {selector: ["/../../../../elsewhere"]}`,
		"name: ..\nmatrix: {workers: [1]}",
		"matrix: {out: [../../../x]}",
		"matrix: {selector: [..]}",
		"name: e\nmatrix: {pipeline: [dense, dense]}",
		"name: e\nmatrix: {recipe: [{name: plain}, {name: dgc, momentum-correction: true}], seed: [1, 2]}",
		"matrix: {recipe: [{name: a, density: 0.1}, {name: ../b}]}",
		"exclude: [{recipe: a, seed: 1}]\nmatrix: {recipe: [{name: a}, {name: b}], seed: [1, 2]}",
	} {
		f.Add([]byte(seed))
	}
	root := filepath.Join(f.TempDir(), "results")
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		cells, err := s.Expand(root)
		if err != nil {
			return
		}
		dir := filepath.Join(root, s.Name)
		seen := map[string]bool{}
		for _, c := range cells {
			if seen[c.Name] {
				t.Fatalf("two cells named %q", c.Name)
			}
			seen[c.Name] = true
			ok, err := inside(dir, c.Config.Out)
			if err != nil || !ok || filepath.Dir(c.Config.Out) != dir {
				t.Fatalf("cell %q writes to %s, outside %s", c.Name, c.Config.Out, dir)
			}
			for _, p := range []string{c.Config.ProfileOut, c.Config.Resume} {
				if p != "" {
					t.Fatalf("cell %q sets a path the runner owns: %q", c.Name, p)
				}
			}
		}
	})
}
