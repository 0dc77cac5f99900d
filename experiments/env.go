package experiments

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// EnvPrefix starts the environment variables that set config keys, as train reads them:
// SSF_BATCH_SIZE sets batch-size.
const EnvPrefix = "SSF_"

// EnvOverrides returns the config keys that environ's SSF_* variables set, by key, with
// their values as text.
func EnvOverrides(environ []string) map[string]string {
	out := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		out[envKey(name)] = value
	}
	return out
}

// WithoutOverrides returns environ without its SSF_* variables: a cell's training gets them
// through its config.yaml instead, where they are recorded.
func WithoutOverrides(environ []string) []string {
	return slices.DeleteFunc(slices.Clone(environ), func(kv string) bool { return strings.HasPrefix(kv, EnvPrefix) })
}

// envKey is the config key of an SSF_* variable.
func envKey(name string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, EnvPrefix)), "_", "-")
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
