package experiments

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestExpand(t *testing.T) {
	s, err := Parse([]byte(`
name: sweep
description: two pipelines at two scales
base:
  model: mlp
  max-steps: 10
  timeout: 5s
  milestones: [1, 2]
matrix:
  pipeline: [dense, ssfusion]
  workers: [2, 4]
  density: [0.01]
`))
	if err != nil {
		t.Fatal(err)
	}
	cells, err := s.Expand("out")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"pipeline-dense_workers-2_density-0.01",
		"pipeline-dense_workers-4_density-0.01",
		"pipeline-ssfusion_workers-2_density-0.01",
		"pipeline-ssfusion_workers-4_density-0.01",
	}
	if len(cells) != len(want) {
		t.Fatalf("%d cells, want %d", len(cells), len(want))
	}
	for i, c := range cells {
		if c.Name != want[i] {
			t.Errorf("cell %d is %s, want %s", i, c.Name, want[i])
		}
		cfg := c.Config
		if cfg.Model != "mlp" || cfg.MaxSteps != 10 || cfg.Timeout != 5*time.Second || len(cfg.Milestones) != 2 {
			t.Errorf("cell %s lost the base: %+v", c.Name, cfg)
		}
		if cfg.Out != filepath.Join("out", "sweep", c.Name) {
			t.Errorf("cell %s writes to %s", c.Name, cfg.Out)
		}
		if cfg.LR != 0.02 {
			t.Errorf("cell %s: lr %g, want the resolved MLP default 0.02", c.Name, cfg.LR)
		}
	}
	if c := cells[3].Config; c.Pipeline != "ssfusion" || c.Workers != 4 || c.Density != 0.01 {
		t.Errorf("last cell: pipeline %s, workers %d, density %g", c.Pipeline, c.Workers, c.Density)
	}
}

func TestBadExperiments(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown top key", "nme: x\nmatrix: {workers: [1]}", `"nme"`},
		{"empty matrix", "name: x\nmatrix: {}", "matrix"},
		{"no matrix", "name: x\nbase: {model: mlp}", "matrix"},
		{"scalar value", "matrix: {workers: 2}", `"workers"`},
		{"empty list", "matrix: {workers: []}", `"workers"`},
		{"duplicate key", "matrix:\n  workers: [1]\n  workers: [2]", "workers"},
		{"not yaml", "matrix: [", "YAML"},
		{"not a mapping", "- 1\n- 2", "mapping"},
		{"bad name", "name: a/b\nmatrix: {workers: [1]}", "name"},
		{"dot name", "name: ..\nmatrix: {workers: [1]}", "plain name"},
		{"hidden name", "name: .x\nmatrix: {workers: [1]}", "plain name"},
		{"out in the matrix", "name: x\nmatrix: {out: [../../../x]}", "out"},
		{"out in the base", "name: x\nbase: {out: /tmp/x}\nmatrix: {workers: [1]}", "out"},
		{"profile-out", "name: x\nbase: {profile-out: ../p.json}\nmatrix: {workers: [1]}", "profile-out"},
		{"resume", "name: x\nmatrix: {resume: [../old]}", "resume"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}

func TestBadCells(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown config key", "matrix: {wokers: [1]}", "wokers"},
		{"unknown base key", "base: {modle: mlp}\nmatrix: {workers: [1]}", "modle"},
		{"wrong type", "matrix: {density: [lots]}", "density"},
		{"invalid value", "base: {pipeline: pertensor}\nmatrix: {density: [0.5, 2]}", "density-2"},
		{"a value the pipeline does not read", "matrix: {pipeline: [pertensor, dense], density: [0.05]}", "pipeline dense does not read density"},
		{"path as a value", `matrix: {selector: ["/../../../../elsewhere"]}`, "selector"},
		{"dots as a value", "matrix: {selector: [..]}", "selector"},
		{"duplicate cells", "matrix: {pipeline: [dense, dense]}", "pipeline-dense"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Expand("out")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}

func TestLoadNamesAfterFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bandwidth.yaml")
	if err := os.WriteFile(path, []byte("matrix: {bandwidth: [10Mbit, 1Gbit]}"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "bandwidth" {
		t.Errorf("name %q, want the file's base name", s.Name)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

// TestListValuesInFolderNames: a list value names its folder without brackets or spaces.
func TestListValuesInFolderNames(t *testing.T) {
	s, err := Parse([]byte("name: x\nmatrix: {milestones: [[30, 60]], bandwidth: [60Mbit]}"))
	if err != nil {
		t.Fatal(err)
	}
	cells, err := s.Expand("out")
	if err != nil {
		t.Fatal(err)
	}
	if want := "milestones-30-60_bandwidth-60Mbit"; cells[0].Name != want {
		t.Errorf("cell %q, want %q", cells[0].Name, want)
	}
}

// TestLoadRefusesFileNamesThatAreNotNames: an experiment without a name takes its file's,
// which must then be a plain name too: "...yaml" would put the report above --results.
func TestLoadRefusesFileNamesThatAreNotNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "...yaml")
	if err := os.WriteFile(path, []byte("matrix: {workers: [1]}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "plain name") {
		t.Fatalf("Load(%s): %v, want a refusal of the name", path, err)
	}
}

// TestLoadResults: the results folder of a run keeps the experiment, which reads back into
// the same cells, placed in the folder even after it was moved.
func TestLoadResults(t *testing.T) {
	file := filepath.Join(t.TempDir(), "exp.yaml")
	if err := os.WriteFile(file, []byte("name: exp\ntarget: 0.9\nmatrix: {pipeline: [dense, ssfusion], workers: [2, 4]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(t.TempDir(), "copied-here")
	if err := SaveSpec(file, moved); err != nil {
		t.Fatal(err)
	}
	s, cells, err := LoadResults(moved)
	if err != nil {
		t.Fatal(err)
	}
	if s.Target != 0.9 || len(cells) != 4 {
		t.Fatalf("target %g, %d cells; want 0.9 and 4", s.Target, len(cells))
	}
	if want := filepath.Join(moved, "pipeline-ssfusion_workers-4"); cells[3].Config.Out != want || cells[3].Setting != "workers-4" {
		t.Errorf("last cell in %s, setting %q; want %s, workers-4", cells[3].Config.Out, cells[3].Setting, want)
	}
	if _, _, err := LoadResults(t.TempDir()); err == nil || !strings.Contains(err.Error(), SpecFile) {
		t.Errorf("a folder without %s: %v", SpecFile, err)
	}
}

func TestBundleAxis(t *testing.T) {
	s, err := Parse([]byte(`
name: recipes
base: {model: mlp, max-steps: 10, density: 0.05}
matrix:
  recipe:
    - name: plain
    - name: dgc
      momentum-correction: true
      density-warmup-steps: 200
  pipeline: [pertensor, ssfusion]
`))
	if err != nil {
		t.Fatal(err)
	}
	cells, err := s.Expand("out")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		name, setting string
		mc            bool
		warmup        int
	}{
		{"recipe-plain_pipeline-pertensor", "recipe-plain", false, 0},
		{"recipe-plain_pipeline-ssfusion", "recipe-plain", false, 0},
		{"recipe-dgc_pipeline-pertensor", "recipe-dgc", true, 200},
		{"recipe-dgc_pipeline-ssfusion", "recipe-dgc", true, 200},
	} {
		c := cells[i]
		if c.Name != want.name || c.Setting != want.setting || c.Group != "" {
			t.Errorf("cell %d: %q, setting %q, group %q; want %q, %q and no group", i, c.Name, c.Setting, c.Group, want.name, want.setting)
		}
		if c.Config.MomentumCorrection != want.mc || c.Config.DensityWarmupSteps != want.warmup || c.Config.Density != 0.05 {
			t.Errorf("cell %s: momentum correction %v, warm-up %d, density %g; want %v, %d and the base's 0.05",
				c.Name, c.Config.MomentumCorrection, c.Config.DensityWarmupSteps, c.Config.Density, want.mc, want.warmup)
		}
		// Every cell holds the keys the axis sets, resolved, and not the axis's own key.
		if c.Values["momentum-correction"] != want.mc || fmt.Sprint(c.Values["density-warmup-steps"]) != fmt.Sprint(want.warmup) {
			t.Errorf("cell %s: values %v", c.Name, c.Values)
		}
		if _, ok := c.Values["recipe"]; ok || c.Bundles["recipe"] != strings.TrimPrefix(want.setting, "recipe-") {
			t.Errorf("cell %s: values %v, bundles %v; want the bundle's name under Bundles only", c.Name, c.Values, c.Bundles)
		}
	}
}

func TestBadBundleAxes(t *testing.T) {
	const plain = "matrix:\n  recipe:\n    - name: plain\n"
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"mixed", plain + "    - dgc\n", []string{`"recipe"`, "mixes"}},
		{"duplicate names", plain + "    - name: plain\n      density: 0.1\n", []string{`"recipe"`, `"plain"`, "two bundles"}},
		{"no name", plain + "    - density: 0.1\n", []string{`"recipe"`, "no name"}},
		{"name not a string", plain + "    - name: 3\n", []string{`"recipe"`, "string"}},
		{"empty name", plain + "    - name: ''\n", []string{`"recipe"`, "string"}},
		{"name a path", plain + "    - name: ../x\n", []string{"recipe", "plain name"}},
		{"name with a space", plain + "    - name: my plain\n", []string{"recipe", `"my plain"`, "plain name"}},
		{"name with brackets", plain + "    - name: '[dgc]'\n", []string{"recipe", `"[dgc]"`, "plain name"}},
		{"key swept elsewhere", plain + "    - {name: dgc, density: 0.1}\n  density: [0.01]\n", []string{"density", "recipe (bundle dgc)", "axis density"}},
		{"key of two bundle axes", plain + "    - {name: a, density: 0.1}\n  other:\n    - {name: b, density: 0.2}\n", []string{"density", "recipe (bundle a)", "other (bundle b)"}},
		{"axis named after a config key", "matrix:\n  seed:\n    - {name: a, density: 0.1}\n", []string{`"seed"`, "config key"}},
		{"axis not a plain name", "matrix:\n  ../r:\n    - {name: a}\n", []string{"../r", "plain name"}},
		{"runner key", plain + "    - {name: a, out: /tmp/x}\n", []string{"out"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			for _, want := range tc.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v, want one naming %s", err, want)
				}
			}
		})
	}
}

// TestBadBundleKeys: a bundle's keys are checked as strictly as the base's, and the error
// names the axis, the bundle and the key.
func TestBadBundleKeys(t *testing.T) {
	for _, tc := range []struct{ name, bundle, key string }{
		{"unknown key", "momentm-correction: true", "momentm-correction"},
		{"wrong type", "momentum-correction: lots", "momentum-correction"},
		{"fraction for a count", "density-warmup-steps: 2.5", "density-warmup-steps"},
		{"duration without unit", "timeout: 10", "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte("matrix:\n  recipe:\n    - name: plain\n    - name: dgc\n      " + tc.bundle + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Expand("out")
			for _, want := range []string{"recipe", "dgc", tc.key} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v, want one naming %s", err, want)
				}
			}
		})
	}
}

// TestSeedGroups: cells that differ in their seed alone share a group, named without the
// seed; a matrix without seed has no groups.
func TestSeedGroups(t *testing.T) {
	for _, tc := range []struct {
		matrix                   string
		cell                     int
		group, setting, gsetting string
	}{
		{"{pipeline: [dense, ssfusion], seed: [1, 2]}", 1, "pipeline-dense", "seed-2", ""},
		{"{pipeline: [dense, ssfusion], seed: [1, 2]}", 2, "pipeline-ssfusion", "seed-1", ""},
		{"{seed: [1, 2], pipeline: [dense], workers: [2]}", 1, "pipeline-dense_workers-2", "seed-2_workers-2", "workers-2"},
		{"{seed: [1, 2]}", 1, "all seeds", "seed-2", ""},
		{"{pipeline: [dense], workers: [2, 4]}", 1, "", "workers-4", "workers-4"},
	} {
		s, err := Parse([]byte("matrix: " + tc.matrix))
		if err != nil {
			t.Fatal(err)
		}
		cells, err := s.Expand("out")
		if err != nil {
			t.Fatal(err)
		}
		c := cells[tc.cell]
		if c.Group != tc.group || c.Setting != tc.setting || c.GroupSetting != tc.gsetting {
			t.Errorf("%s, cell %s: group %q, setting %q, group setting %q; want %q, %q, %q",
				tc.matrix, c.Name, c.Group, c.Setting, c.GroupSetting, tc.group, tc.setting, tc.gsetting)
		}
	}
}

func TestExclude(t *testing.T) {
	s, err := Parse([]byte(`
exclude:
  - {recipe: dgc, pipeline: dense}
  - {seed: 2, pipeline: pertensor}
matrix:
  recipe:
    - name: plain
    - {name: dgc, momentum-correction: true}
  pipeline: [dense, pertensor]
  seed: [1, 2]
`))
	if err != nil {
		t.Fatal(err)
	}
	cells, err := s.Expand("out")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cells {
		names = append(names, c.Name)
	}
	want := []string{
		"recipe-plain_pipeline-dense_seed-1", "recipe-plain_pipeline-dense_seed-2", "recipe-plain_pipeline-pertensor_seed-1",
		"recipe-dgc_pipeline-pertensor_seed-1",
	}
	if !slices.Equal(names, want) {
		t.Errorf("cells %q, want %q", names, want)
	}
}

// TestExcludeLists: an entry giving an axis a list of values leaves out the cells holding
// any of them, combined with the entry's other axes.
func TestExcludeLists(t *testing.T) {
	s, err := Parse([]byte(`
exclude:
  - {density: [0.2, 0.3], pipeline: [dense, ssfusion]}
matrix:
  density: [0.01, 0.2, 0.3]
  pipeline: [dense, pertensor, ssfusion]
`))
	if err != nil {
		t.Fatal(err)
	}
	cells, err := s.Expand("out")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cells {
		names = append(names, c.Name)
	}
	want := []string{
		"density-0.01_pipeline-dense", "density-0.01_pipeline-pertensor", "density-0.01_pipeline-ssfusion",
		"density-0.2_pipeline-pertensor", "density-0.3_pipeline-pertensor",
	}
	if !slices.Equal(names, want) {
		t.Errorf("cells %q, want %q", names, want)
	}
}

func TestBadExclude(t *testing.T) {
	const matrix = "matrix:\n  recipe: [{name: plain}, {name: dgc}]\n  pipeline: [dense]\n"
	for _, tc := range []struct{ name, exclude, want string }{
		{"not a list", "exclude: {pipeline: dense}\n", "list"},
		{"not a mapping", "exclude: [dense]\n", "mapping"},
		{"empty", "exclude: [{}]\n", "mapping"},
		{"unknown axis", "exclude: [{pipelin: dense}]\n", "pipelin is not an axis"},
		{"unknown value", "exclude: [{recipe: dcg}]\n", "recipe has no value dcg (it has plain, dgc)"},
		{"unknown value in a list", "exclude: [{recipe: [plain, dcg]}]\n", "recipe has no value dcg"},
		{"empty list", "exclude: [{recipe: []}]\n", "empty list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.exclude + matrix))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "exclude") {
				t.Errorf("error %v, want one naming exclude and %q", err, tc.want)
			}
		})
	}
	s, err := Parse([]byte("exclude: [{pipeline: dense}]\n" + matrix))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Expand("out"); err == nil || !strings.Contains(err.Error(), "every cell") {
		t.Errorf("excluding every cell: %v", err)
	}
}
