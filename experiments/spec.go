// Package experiments reads experiment files and expands them into training runs. An
// experiment names a base configuration and a matrix: config keys, each with a list of
// values to sweep; every combination of the values is one cell, trained with the base
// configuration overridden by the cell's values.
//
//	name: quickstart
//	base:
//	  model: resnet20
//	  max-steps: 300
//	matrix:
//	  pipeline: [dense, pertensor, multitensor, ssfusion]
//	  workers: [2, 4]
//
// Keys are the flag names of `train` (see `train --help`).
//
// # Bundle axes
//
// An axis whose values are mappings is a bundle axis: each value is a named bundle of config
// keys, so that one axis switches a recipe of several settings at once.
//
//	matrix:
//	  recipe:
//	    - name: plain
//	    - name: dgc
//	      momentum-correction: true
//	      density-warmup-steps: 200
//	  pipeline: [pertensor, ssfusion]
//
// The axis's key (recipe) is not a config key but names the recipe in the cells' folders
// (recipe-dgc_pipeline-ssfusion). Every value needs a name, which follows the rules of any
// swept value in a folder name; its other entries are config keys, checked as strictly as
// the base's. An axis cannot mix bundles with plain values, two bundles cannot share a
// name, and a config key belongs to one axis only: a bundle may not set a key that another
// axis sweeps. Keys a bundle leaves out keep the base's value (plain above trains without
// momentum correction, as the base does).
//
// # Exclusions
//
// Exclude leaves combinations out of the matrix, such as a recipe that one pipeline
// refuses; each entry names axes and a value of each (a bundle by its name), and the cells
// that match every entry's values are left out:
//
//	exclude:
//	  - {recipe: dgc, pipeline: dense}
//
// An entry may give an axis a list of values, and then matches a cell that has any of them:
//
//	exclude:
//	  - {density: [matched-0.01, matched-0.05], pipeline: [dense, ssfusion]}
//
// An axis the matrix lacks, a value its axis lacks, and leaving out every cell are errors.
//
// # Comparisons
//
// Compare names the pipeline every other seed group is tested against and the margin
// within which its accuracy counts as equal; the report then gives each group's mean with
// a 95% confidence interval, its difference from the reference's, a test of that
// difference and an equivalence verdict:
//
//	compare: {reference: dense, margin: 0.5}
//
// The margin is in accuracy points (perplexity for a language model). Each group is set
// against the reference group that agrees with it on every axis along which the reference
// pipeline's own groups vary, so a reference swept over fewer axes (dense has no density)
// serves every group of its setting.
//
// Pairs add tests that the reference does not make, at the same margin: every group whose
// axis values match group is tested against the group that matches against and agrees
// with it on every other axis (see Pair), and the report gives them in a table of their
// own, pairs.csv beside it.
//
// # Seeds
//
// An axis named seed repeats every other combination with each seed. Cells that differ in
// their seed alone form a group (Cell.Group), and the report gives each group's mean and
// standard deviation over its seeds, and the plots its mean curve inside the band of its
// seeds.
package experiments

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/ssfusion/ssfusion/internal/atomicfile"
	"github.com/ssfusion/ssfusion/trainer"
	"go.yaml.in/yaml/v3"
)

// Spec is a parsed experiment file.
type Spec struct {
	Name        string
	Description string
	// Target is the test accuracy (a fraction, e.g. 0.97), or for language models the
	// perplexity, whose time to reach the report compares; 0 leaves that column out.
	Target float64
	Base   map[string]any
	Matrix []Axis // in the order of the file
	// Exclude lists combinations the matrix leaves out: a cell whose values match every
	// entry of one of them (axis key to values, a bundle by its name, each as it reads in
	// folder names; a cell matches an entry holding any of its value) is not part of the
	// experiment.
	Exclude []map[string][]string
	// Compare, when set, is the test of every seed group against a reference group.
	Compare *Compare
	// Env holds config keys set by the environment (SSF_* variables, see EnvOverrides),
	// which override the base and the matrix in every cell, as they would override the
	// flags of train.
	Env map[string]string
}

// Axis is one swept key and its values: a config key with a list of values, or a bundle
// axis, whose key names a recipe and whose values are bundles of config keys.
type Axis struct {
	Key     string
	Values  []any    // a config key's values; nil on a bundle axis
	Bundles []Bundle // a bundle axis's values; nil on a config key's axis
}

// Bundle is one value of a bundle axis: the name its cells go by and the config keys it sets.
type Bundle struct {
	Name string
	Keys map[string]any
}

// size is the number of values on the axis.
func (a Axis) size() int {
	if a.Bundles != nil {
		return len(a.Bundles)
	}
	return len(a.Values)
}

// sets lists, sorted, the config keys the axis sets in some cell: its key, or on a bundle
// axis the keys of all its bundles.
func (a Axis) sets() []string {
	if a.Bundles == nil {
		return []string{a.Key}
	}
	var keys []string
	for _, b := range a.Bundles {
		for k := range b.Keys {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// seedKey is the axis whose cells the report and the plots pool: runs that differ in the
// seed alone measure the same thing.
const seedKey = "seed"

// Cell is one training run of an experiment.
type Cell struct {
	Name    string // folder name under the experiment's results, from the swept values
	Setting string // the swept values other than the pipeline, named as in Name
	// Group is the name of the cell's seed group, its Name without the seed, which the
	// cells that differ in their seed alone share; "" when the matrix does not sweep seed.
	Group string
	// GroupSetting is Setting without the seed: the setting of the cell's group.
	GroupSetting string
	// Values holds the config keys the swept values set: a config key's value as the file
	// gives it, a bundle's keys, and, so that every cell of a bundle axis holds the same
	// keys, the cell's configured value of each key that only other bundles of the axis set.
	Values map[string]any
	// Bundles holds the name of the cell's bundle on each bundle axis, by the axis's key.
	Bundles map[string]string
	Config  trainer.Config // base + values, resolved and validated
}

// Load reads and checks the experiment file at path. An experiment without a name takes
// the file's base name.
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading experiment: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("experiment %s: %w", path, err)
	}
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		if err := checkName(s.Name); err != nil {
			return nil, fmt.Errorf("experiment %s has no name: and its file name cannot stand for one: %w", path, err)
		}
	}
	return s, nil
}

// Parse reads an experiment from YAML.
func Parse(data []byte) (*Spec, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	if len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("want a mapping with the keys name, description, target, base, matrix and exclude")
	}
	s := &Spec{}
	var exclude *yaml.Node // checked against the matrix, which may come after it
	doc := root.Content[0]
	for i := 0; i < len(doc.Content); i += 2 {
		key, val := doc.Content[i], doc.Content[i+1]
		var err error
		switch key.Value {
		case "name":
			err = val.Decode(&s.Name)
		case "description":
			err = val.Decode(&s.Description)
		case "target":
			err = val.Decode(&s.Target)
			if err == nil && s.Target < 0 {
				err = fmt.Errorf("line %d: must not be negative, got %g", val.Line, s.Target)
			}
		case "base":
			err = val.Decode(&s.Base)
		case "matrix":
			s.Matrix, err = parseMatrix(val)
		case "exclude":
			exclude = val
		case "compare":
			s.Compare, err = parseCompare(val)
		default:
			return nil, fmt.Errorf("line %d: unknown key %q (want name, description, target, base, matrix, exclude, compare)", key.Line, key.Value)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key.Value, err)
		}
	}
	if len(s.Matrix) == 0 {
		return nil, errors.New("matrix: empty; name at least one key with a list of values, e.g. pipeline: [dense, ssfusion]")
	}
	if s.Name != "" {
		if err := checkName(s.Name); err != nil {
			return nil, fmt.Errorf("name: %w", err)
		}
	}
	for _, key := range runnerKeys {
		_, inBase := s.Base[key]
		if inBase || slices.ContainsFunc(s.Matrix, func(a Axis) bool { return slices.Contains(a.sets(), key) }) {
			return nil, fmt.Errorf("%s: an experiment cannot set it; the run command places every cell's files in the experiment's folder under --results", key)
		}
	}
	if err := checkOneAxisPerKey(s.Matrix); err != nil {
		return nil, fmt.Errorf("matrix: %w", err)
	}
	if exclude != nil {
		var err error
		if s.Exclude, err = parseExclude(exclude, s.Matrix); err != nil {
			return nil, fmt.Errorf("exclude: %w", err)
		}
	}
	if s.Compare != nil {
		if err := s.Compare.check(s.Matrix); err != nil {
			return nil, fmt.Errorf("compare: %w", err)
		}
	}
	return s, nil
}

// parseExclude reads the combinations to leave out, each a mapping of axes to one of their
// values or a list of them, and refuses an axis the matrix lacks or a value the axis lacks:
// a misspelt exclusion would otherwise leave in the cells it was to remove.
func parseExclude(n *yaml.Node, axes []Axis) ([]map[string][]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("line %d: want a list of combinations, e.g. - {recipe: dgc, pipeline: dense}", n.Line)
	}
	var out []map[string][]string
	for _, entry := range n.Content {
		var m map[string]any
		if err := entry.Decode(&m); err != nil || len(m) == 0 {
			return nil, fmt.Errorf("line %d: want a mapping of matrix axes to a value of each (or a list of values), e.g. {recipe: dgc, pipeline: dense}", entry.Line)
		}
		combination := make(map[string][]string, len(m))
		for key, v := range m {
			i := slices.IndexFunc(axes, func(a Axis) bool { return a.Key == key })
			if i < 0 {
				return nil, fmt.Errorf("line %d: %s is not an axis of the matrix", entry.Line, key)
			}
			values, ok := v.([]any)
			if !ok {
				values = []any{v}
			}
			if len(values) == 0 {
				return nil, fmt.Errorf("line %d: %s: an empty list of values matches no cell", entry.Line, key)
			}
			for _, v := range values {
				value := fmt.Sprint(v)
				if folder, err := folderValue(key, v); err == nil {
					value = folder
				}
				if !slices.Contains(axes[i].folders(), value) {
					return nil, fmt.Errorf("line %d: the axis %s has no value %s (it has %s)", entry.Line, key, value, strings.Join(axes[i].folders(), ", "))
				}
				combination[key] = append(combination[key], value)
			}
		}
		out = append(out, combination)
	}
	return out, nil
}

// folders lists the axis's values as they read in folder names: a bundle by its name.
// A value that cannot be part of a folder name, which Expand refuses, reads as fmt prints it.
func (a Axis) folders() []string {
	if a.Bundles != nil {
		names := make([]string, len(a.Bundles))
		for i, b := range a.Bundles {
			names[i] = b.Name
		}
		return names
	}
	out := make([]string, len(a.Values))
	for i, v := range a.Values {
		out[i] = fmt.Sprint(v)
		if folder, err := folderValue(a.Key, v); err == nil {
			out[i] = folder
		}
	}
	return out
}

// excluded reports whether the cell of the values at idx is one that Exclude leaves out.
func (s *Spec) excluded(idx []int) bool {
	return slices.ContainsFunc(s.Exclude, func(combination map[string][]string) bool {
		for a, axis := range s.Matrix {
			if vs, ok := combination[axis.Key]; ok && !slices.Contains(vs, axis.folders()[idx[a]]) {
				return false
			}
		}
		return true
	})
}

// checkOneAxisPerKey refuses a config key that two axes set: which of the two values a
// cell trained with would depend on the order of the axes, and its name would show both.
func checkOneAxisPerKey(axes []Axis) error {
	owner := map[string]Axis{}
	for _, a := range axes {
		for _, key := range a.sets() {
			other, taken := owner[key]
			if !taken {
				owner[key] = a
				continue
			}
			return fmt.Errorf("%s is set by %s and by %s; sweep each config key on one axis only", key, setBy(other, key), setBy(a, key))
		}
	}
	return nil
}

// setBy names where axis a sets key: the axis itself, or the bundles of a bundle axis.
func setBy(a Axis, key string) string {
	if a.Bundles == nil {
		return "the axis " + a.Key
	}
	var names []string
	for _, b := range a.Bundles {
		if _, ok := b.Keys[key]; ok {
			names = append(names, b.Name)
		}
	}
	return fmt.Sprintf("the bundle axis %s (bundle %s)", a.Key, strings.Join(names, ", "))
}

func parseMatrix(n *yaml.Node) ([]Axis, error) {
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: want a mapping of config keys to lists of values", n.Line)
	}
	var axes []Axis
	seen := map[string]bool{}
	for i := 0; i < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if seen[key.Value] {
			return nil, fmt.Errorf("line %d: key %q appears twice", key.Line, key.Value)
		}
		seen[key.Value] = true
		if val.Kind != yaml.SequenceNode {
			return nil, fmt.Errorf("line %d: key %q: want a list of values, e.g. %s: [a, b]", key.Line, key.Value, key.Value)
		}
		if len(val.Content) == 0 {
			return nil, fmt.Errorf("line %d: key %q has no values", key.Line, key.Value)
		}
		mappings := 0
		for _, v := range val.Content {
			if v.Kind == yaml.MappingNode {
				mappings++
			}
		}
		switch mappings {
		case 0:
			var values []any
			if err := val.Decode(&values); err != nil {
				return nil, fmt.Errorf("key %q: %w", key.Value, err)
			}
			axes = append(axes, Axis{Key: key.Value, Values: values})
		case len(val.Content):
			bundles, err := parseBundles(key, val)
			if err != nil {
				return nil, err
			}
			axes = append(axes, Axis{Key: key.Value, Bundles: bundles})
		default:
			return nil, fmt.Errorf("line %d: axis %q mixes bundles (mappings with a name) and plain values; make every value a bundle (a bundle of no keys is just - name: plain)", key.Line, key.Value)
		}
	}
	return axes, nil
}

// parseBundles reads the values of the bundle axis key, each a mapping of a name and the
// config keys it sets. Whether the keys are config keys is for Expand to check, as for any
// other key.
func parseBundles(key, list *yaml.Node) ([]Bundle, error) {
	axis := key.Value
	if err := checkName(axis); err != nil {
		return nil, fmt.Errorf("line %d: the bundle axis's key names its cells' folders: %w", key.Line, err)
	}
	if isConfigKey(axis) {
		return nil, fmt.Errorf("line %d: axis %q holds bundles, so its key names a recipe, not a config key; call it something else (such as recipe), or list plain values of %s", key.Line, axis, axis)
	}
	var bundles []Bundle
	for _, v := range list.Content {
		b, err := parseBundle(axis, v)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(bundles, func(o Bundle) bool { return o.Name == b.Name }) {
			return nil, fmt.Errorf("line %d: axis %q has two bundles named %q; each needs a name of its own", v.Line, axis, b.Name)
		}
		bundles = append(bundles, b)
	}
	return bundles, nil
}

// parseBundle reads one bundle of the axis: its name, a plain name as the folder of its
// cells needs, and its config keys.
func parseBundle(axis string, n *yaml.Node) (Bundle, error) {
	var name *yaml.Node
	for i := 0; i < len(n.Content); i += 2 {
		if n.Content[i].Value == "name" {
			name = n.Content[i+1]
		}
	}
	if name == nil {
		return Bundle{}, fmt.Errorf("line %d: a bundle of axis %q has no name; give each one, e.g. - name: plain", n.Line, axis)
	}
	if name.Kind != yaml.ScalarNode || name.ShortTag() != "!!str" || name.Value == "" {
		return Bundle{}, fmt.Errorf("line %d: axis %q: a bundle's name must be a non-empty string, got %q", name.Line, axis, name.Value)
	}
	// The name goes into folder names as it is, so it must be plain already.
	if err := checkName(name.Value); err != nil {
		return Bundle{}, fmt.Errorf("line %d: axis %q: bundle name %w", name.Line, axis, err)
	}
	var keys map[string]any
	if err := n.Decode(&keys); err != nil {
		return Bundle{}, fmt.Errorf("axis %q, bundle %s: %w", axis, name.Value, err)
	}
	delete(keys, "name")
	return Bundle{Name: name.Value, Keys: keys}, nil
}

// isConfigKey reports whether key is a key of train's configuration.
func isConfigKey(key string) bool {
	keys, _ := trainer.Defaults().Keys() // Defaults always encodes
	_, ok := keys[key]
	return ok
}

// Expand returns every cell of the experiment, the last matrix key varying fastest, with
// results under resultsDir/<experiment>/<cell>/. A key that is not a config key, a value of
// the wrong type, a value that cannot be part of a folder name, two cells alike or a
// configuration that does not validate is an error naming the key or the cell (and on a
// bundle axis the axis and the bundle). A spec without a name (from Parse alone) puts its
// cells directly in resultsDir.
func (s *Spec) Expand(resultsDir string) ([]Cell, error) {
	if s.Name != "" {
		if err := checkName(s.Name); err != nil {
			return nil, fmt.Errorf("name: %w", err)
		}
	}
	dir := filepath.Join(resultsDir, s.Name)
	base := trainer.Defaults()
	if err := decode(s.Base, &base); err != nil {
		return nil, fmt.Errorf("base: %w", err)
	}
	if err := checkBundles(s.Matrix, base); err != nil {
		return nil, fmt.Errorf("matrix: %w", err)
	}
	var cells []Cell
	idx := make([]int, len(s.Matrix))
	for more := true; more; more = next(idx, s.Matrix) {
		if s.excluded(idx) {
			continue
		}
		c, err := s.cell(idx, base, dir)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(cells, func(o Cell) bool { return o.Name == c.Name }) {
			return nil, fmt.Errorf("matrix: two cells are %s; each value of a key must appear once", c.Name)
		}
		cells = append(cells, c)
	}
	if len(cells) == 0 {
		return nil, errors.New("exclude: leaves out every cell of the matrix")
	}
	return cells, nil
}

// checkBundles decodes each bundle on its own onto base, so that an unknown key or a value
// of the wrong type is reported with the axis and the bundle that hold it.
func checkBundles(axes []Axis, base trainer.Config) error {
	for _, a := range axes {
		for _, b := range a.Bundles {
			cfg := base
			if err := decode(b.Keys, &cfg); err != nil {
				return fmt.Errorf("axis %s, bundle %s: %w", a.Key, b.Name, err)
			}
		}
	}
	return nil
}

// cell builds the cell of the values at idx on each axis, writing under dir.
func (s *Spec) cell(idx []int, base trainer.Config, dir string) (Cell, error) {
	values := map[string]any{}
	bundles := map[string]string{}
	// The parts of the cell's name, and which of them name its setting and its group.
	var parts, setting, group, groupSetting []string
	for a, axis := range s.Matrix {
		var folder string
		if axis.Bundles != nil {
			b := axis.Bundles[idx[a]]
			maps.Copy(values, b.Keys)
			bundles[axis.Key] = b.Name
			folder = b.Name
		} else {
			v := axis.Values[idx[a]]
			values[axis.Key] = v
			var err error
			if folder, err = folderValue(axis.Key, v); err != nil {
				return Cell{}, err
			}
		}
		part := axis.Key + "-" + folder
		parts = append(parts, part)
		if axis.Key != "pipeline" {
			setting = append(setting, part)
		}
		if axis.Key != seedKey {
			group = append(group, part)
			if axis.Key != "pipeline" {
				groupSetting = append(groupSetting, part)
			}
		}
	}
	c := Cell{Name: strings.Join(parts, "_"), Setting: strings.Join(setting, "_"), GroupSetting: strings.Join(groupSetting, "_"), Values: values}
	if len(bundles) > 0 {
		c.Bundles = bundles
	}
	if len(group) < len(parts) {
		c.Group = strings.Join(group, "_")
		if c.Group == "" {
			c.Group = "all seeds" // the matrix sweeps the seed alone
		}
	}
	cfg := base
	if err := decode(values, &cfg); err != nil {
		return Cell{}, fmt.Errorf("matrix: %w", err)
	}
	if err := s.decodeEnv(&cfg); err != nil {
		return Cell{}, err
	}
	// The base holds settings for all of the experiment's pipelines (a density for
	// dense too), so each cell's pipeline takes the ones it reads; a value the matrix
	// gives a pipeline that does not read it stays, for Validate to refuse.
	if set, err := cfg.Settings.For(cfg.Pipeline, slices.Collect(maps.Keys(values))...); err == nil {
		cfg.Settings = set
	}
	cfg.Out = filepath.Join(dir, c.Name)
	if ok, err := inside(dir, cfg.Out); err != nil || !ok {
		return Cell{}, fmt.Errorf("cell %s would write outside %s", c.Name, dir)
	}
	cfg.Resolve()
	if err := cfg.Validate(); err != nil {
		return Cell{}, fmt.Errorf("cell %s: %w\n(exclude: leaves such a combination out)", c.Name, err)
	}
	c.Config = cfg
	if err := c.fillBundleKeys(s.Matrix); err != nil {
		return Cell{}, err
	}
	return c, nil
}

// fillBundleKeys adds to c.Values the configured value of each key that other bundles of a
// bundle axis set and c's bundle leaves out, so that cells compare key by key.
func (c *Cell) fillBundleKeys(axes []Axis) error {
	var keys map[string]any
	for _, a := range axes {
		for _, key := range a.sets() {
			if _, ok := c.Values[key]; ok || a.Bundles == nil {
				continue
			}
			if keys == nil {
				var err error
				if keys, err = c.Config.Keys(); err != nil {
					return fmt.Errorf("cell %s: %w", c.Name, err)
				}
			}
			c.Values[key] = keys[key]
		}
	}
	return nil
}

// decodeEnv sets the keys of s.Env on cfg.
func (s *Spec) decodeEnv(cfg *trainer.Config) error {
	if len(s.Env) == 0 {
		return nil
	}
	env := make(map[string]any, len(s.Env))
	for k, v := range s.Env {
		if slices.Contains(runnerKeys, k) {
			return fmt.Errorf("environment: %s sets %s, which the run command decides for every cell", envName(k), k)
		}
		env[k] = v
	}
	if err := decode(env, cfg); err != nil {
		return fmt.Errorf("environment (%s): %w", envText(s.Env), err)
	}
	return nil
}

// next advances idx like an odometer, the last axis fastest; false after the last cell.
func next(idx []int, axes []Axis) bool {
	for a := len(idx) - 1; a >= 0; a-- {
		idx[a]++
		if idx[a] < axes[a].size() {
			return true
		}
		idx[a] = 0
	}
	return false
}

// decode sets the config keys in m on cfg, rejecting unknown keys and values of the wrong
// type, as `train --config` does.
func decode(m map[string]any, cfg *trainer.Config) error {
	if len(m) == 0 {
		return nil
	}
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result:           cfg,
		ErrorUnused:      true,
		WeaklyTypedInput: true,
		DecodeHook:       trainer.DecodeHook(),
	})
	if err != nil {
		return err
	}
	return dec.Decode(m)
}

// SetBase sets a base configuration key, as the run command's --data-dir does.
func (s *Spec) SetBase(key string, value any) {
	if s.Base == nil {
		s.Base = map[string]any{}
	}
	s.Base[key] = value
}

// SaveSpec copies the experiment file at path into dir as experiment.yaml, so that the
// results can be redrawn (`plot DIR`) without the original file. It first clears the
// temporary files that a run killed while it wrote into dir left behind.
func SaveSpec(path, dir string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading experiment: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating the experiment's folder: %w", err)
	}
	if _, err := atomicfile.RemoveStale(dir); err != nil {
		return err
	}
	return trainer.WriteFileAtomic(filepath.Join(dir, SpecFile), data)
}

// SpecFile is the copy of the experiment file kept beside its results.
const SpecFile = "experiment.yaml"

// LoadResults reads the experiment whose results are in dir (a folder the run command
// wrote) and returns it with its cells, placed in dir whatever its name now.
func LoadResults(dir string) (*Spec, []Cell, error) {
	path := filepath.Join(dir, SpecFile)
	if _, err := os.Stat(path); err != nil {
		return nil, nil, fmt.Errorf("%s does not hold the results of an experiment (no %s): %w", dir, SpecFile, err)
	}
	s, err := Load(path)
	if err != nil {
		return nil, nil, err
	}
	s.Name = filepath.Base(filepath.Clean(dir))
	if s.Env, err = loadEnv(dir); err != nil {
		return nil, nil, err
	}
	cells, err := s.Expand(filepath.Dir(filepath.Clean(dir)))
	if err != nil {
		return nil, nil, fmt.Errorf("experiment %s: %w", path, err)
	}
	return s, cells, nil
}
