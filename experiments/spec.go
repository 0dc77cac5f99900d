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
package experiments

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-viper/mapstructure/v2"
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
	// Env holds config keys set by the environment (SSF_* variables, see EnvOverrides),
	// which override the base and the matrix in every cell, as they would override the
	// flags of train.
	Env map[string]string
}

// Axis is one swept key and its values.
type Axis struct {
	Key    string
	Values []any
}

// Cell is one training run of an experiment.
type Cell struct {
	Name    string         // folder name under the experiment's results, from the swept values
	Setting string         // the swept values other than the pipeline, named as in Name
	Values  map[string]any // the swept values that made this cell
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
		return nil, errors.New("want a mapping with the keys name, description, target, base and matrix")
	}
	s := &Spec{}
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
		default:
			return nil, fmt.Errorf("line %d: unknown key %q (want name, description, target, base, matrix)", key.Line, key.Value)
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
		if inBase || slices.ContainsFunc(s.Matrix, func(a Axis) bool { return a.Key == key }) {
			return nil, fmt.Errorf("%s: an experiment cannot set it; the run command places every cell's files in the experiment's folder under --results", key)
		}
	}
	return s, nil
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
		var values []any
		if err := val.Decode(&values); err != nil {
			return nil, fmt.Errorf("key %q: %w", key.Value, err)
		}
		if len(values) == 0 {
			return nil, fmt.Errorf("line %d: key %q has no values", key.Line, key.Value)
		}
		axes = append(axes, Axis{Key: key.Value, Values: values})
	}
	return axes, nil
}

// Expand returns every cell of the experiment, the last matrix key varying fastest, with
// results under resultsDir/<experiment>/<cell>/. A key that is not a config key, a value of
// the wrong type, a value that cannot be part of a folder name, two cells alike or a
// configuration that does not validate is an error naming the key or the cell. A spec
// without a name (from Parse alone) puts its cells directly in resultsDir.
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
	var cells []Cell
	idx := make([]int, len(s.Matrix))
	for {
		values := make(map[string]any, len(s.Matrix))
		var parts, setting []string
		for a, axis := range s.Matrix {
			v := axis.Values[idx[a]]
			values[axis.Key] = v
			folder, err := folderValue(axis.Key, v)
			if err != nil {
				return nil, err
			}
			parts = append(parts, axis.Key+"-"+folder)
			if axis.Key != "pipeline" {
				setting = append(setting, parts[len(parts)-1])
			}
		}
		name := strings.Join(parts, "_")
		if slices.ContainsFunc(cells, func(c Cell) bool { return c.Name == name }) {
			return nil, fmt.Errorf("matrix: two cells are %s; each value of a key must appear once", name)
		}
		cfg := base
		if err := decode(values, &cfg); err != nil {
			return nil, fmt.Errorf("matrix: %w", err)
		}
		if err := s.decodeEnv(&cfg); err != nil {
			return nil, err
		}
		cfg.Out = filepath.Join(dir, name)
		if ok, err := inside(dir, cfg.Out); err != nil || !ok {
			return nil, fmt.Errorf("cell %s would write outside %s", name, dir)
		}
		cfg.Resolve()
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("cell %s: %w", name, err)
		}
		cells = append(cells, Cell{Name: name, Setting: strings.Join(setting, "_"), Values: values, Config: cfg})
		if !next(idx, s.Matrix) {
			return cells, nil
		}
	}
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
		if idx[a] < len(axes[a].Values) {
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
// results can be redrawn (`plot DIR`) without the original file.
func SaveSpec(path, dir string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading experiment: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating the experiment's folder: %w", err)
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
