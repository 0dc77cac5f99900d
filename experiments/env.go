package experiments

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ssfusion/ssfusion/trainer"
	"go.yaml.in/yaml/v3"
)

// EnvPrefix starts the environment variables that set config keys, as train reads them:
// SSF_BATCH_SIZE sets batch-size.
const EnvPrefix = "SSF_"

// EnvOverrides returns the config keys that environ's SSF_* variables set, by key, with
// their values as text, read as train reads them: a variable counts when it is named after
// a config key (SSF_ and the key in capitals, dashes as underscores) and is not empty.
func EnvOverrides(environ []string) map[string]string {
	keys, _ := trainer.Defaults().Keys() // Defaults always encodes
	byName := make(map[string]string, len(keys))
	for key := range keys {
		byName[envName(key)] = key
	}
	out := map[string]string{}
	for _, kv := range environ {
		if name, value, ok := strings.Cut(kv, "="); ok && value != "" {
			if key, known := byName[name]; known {
				out[key] = value
			}
		}
	}
	return out
}

// WithoutOverrides returns environ without its SSF_* variables: a cell's training gets them
// through its config.yaml instead, where they are recorded.
func WithoutOverrides(environ []string) []string {
	return slices.DeleteFunc(slices.Clone(environ), func(kv string) bool { return strings.HasPrefix(kv, EnvPrefix) })
}

// envName is the variable of a config key.
func envName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, "-", "_"))
}

// envText lists env's variables as NAME=value, sorted.
func envText(env map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		parts = append(parts, fmt.Sprintf("%s=%s", envName(k), env[k]))
	}
	return strings.Join(parts, ", ")
}

// EnvFile keeps, beside an experiment's results, the SSF_* overrides its cells ran with,
// so that the results are read back (plot) with the settings that made them.
const EnvFile = "environment.yaml"

// SaveEnv records env in dir (see EnvFile); with no overrides it removes the record.
func SaveEnv(dir string, env map[string]string) error {
	path := filepath.Join(dir, EnvFile)
	if len(env) == 0 {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	data, err := yaml.Marshal(env)
	if err != nil {
		return fmt.Errorf("encoding the environment overrides: %w", err)
	}
	return trainer.WriteFileAtomic(path, data)
}

// loadEnv reads the overrides SaveEnv recorded in dir; none when there is no record.
func loadEnv(dir string) (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, EnvFile))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var env map[string]string
	if err := yaml.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, EnvFile), err)
	}
	return env, nil
}
