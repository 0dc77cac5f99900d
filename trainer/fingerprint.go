package trainer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ssfusion/ssfusion/pipelines"
)

// ResultsVersion is bumped whenever a change of the code changes the results the same
// configuration gives (the synthetic data, a pipeline's planning, the defaults). It is
// recorded in summary.json and checkpoints, so that results of an earlier version are not
// taken for this one's (see experiments.Runner) and a checkpoint is not resumed across it.
// Version 0 is what summaries from before its introduction hold.
const ResultsVersion = 2 // 2: ExDyna measures its threshold and rebalances toward the mean count

// SafeKeys are the config keys that do not shape a run's results, which may therefore
// change between a run and its resumption, or between an experiment's runs, without making
// the results stale: where the data and outputs live, how often to log, evaluate, check and
// checkpoint, whether to write TensorBoard files or the best evaluation's weights, and the transport's address and failure
// timeout. Every other key shapes the results (the trained model, its accuracy curve, or its
// measured speed).
var SafeKeys = []string{"data-dir", "out", "resume", "profile-out", "checkpoint-every", "log-every", "eval-every", "check-every", "bind-addr", "timeout", "resume-changed", "tensorboard", "save-best"}

// structuralKeys are the result-shaping keys a checkpoint cannot be resumed across at
// all: the saved parameters, data order and pipeline state would not fit.
var structuralKeys = []string{"model", "dataset", "pipeline", "workers", "batch-size", "seed", "width", "seq-len", "hidden", "layers", "augment", "momentum-correction"}

// Changed lists, in key order, the result-shaping keys whose values differ between two
// configurations, each as "key: was → now". Both should be resolved (see Resolve), as
// summary.json and checkpoints record them.
func Changed(was, now Config) ([]string, error) {
	a, err := was.Keys()
	if err != nil {
		return nil, err
	}
	b, err := now.Keys()
	if err != nil {
		return nil, err
	}
	// A key the pipeline does not read cannot shape its results; Check keeps it at its
	// default, but results recorded before that rule may hold another value.
	spec, specErr := pipelines.Lookup(now.Pipeline)
	ignored := func(k string) bool {
		return specErr == nil && was.Pipeline == now.Pipeline && slices.Contains(pipelines.Keys(), k) && !spec.ReadsKey(k)
	}
	var keys []string
	for k := range a {
		if !slices.Contains(SafeKeys, k) && !ignored(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		// Printing compares lists and numbers by value (a nil list and an empty one alike),
		// as a YAML or JSON round trip leaves them.
		if x, y := fmt.Sprint(a[k]), fmt.Sprint(b[k]); x != y {
			out = append(out, fmt.Sprintf("%s: %s → %s", k, x, y))
		}
	}
	return out, nil
}

// structural returns the changes among changed that touch structuralKeys.
func structural(changed []string) []string {
	var out []string
	for _, c := range changed {
		key, _, _ := strings.Cut(c, ":")
		if slices.Contains(structuralKeys, key) {
			out = append(out, c)
		}
	}
	return out
}

// ConfigChange records a resumption under changed settings (--resume-changed): the step
// the checkpoint held, the result-shaping keys that changed, and the configuration the
// steps before it ran with.
type ConfigChange struct {
	Step     int      `json:"step"`
	Changed  []string `json:"changed"`
	Previous Config   `json:"previous"`
}
