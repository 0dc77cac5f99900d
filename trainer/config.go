package trainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/ssfusion/ssfusion/pipelines"
)

// Config is one training run. Each field's mapstructure tag is its command-line flag, its
// key in a --config YAML file and, upper-cased with SSF_ in front, its environment
// variable; its usage tag is the flag's help and Defaults its default (package
// internal/keys makes the flags), and Validate checks it.
type Config struct {
	ModelOptions       `mapstructure:",squash"`
	DataOptions        `mapstructure:",squash"`
	OptimOptions       `mapstructure:",squash"`
	pipelines.Settings `mapstructure:",squash"` // the gradient pipeline and its options
	DistOptions        `mapstructure:",squash"`
	OutputOptions      `mapstructure:",squash"`
}

// ModelOptions are the keys of the model and its shape.
type ModelOptions struct {
	Model   string  `mapstructure:"model" json:"model" usage:"model: mlp, resnet8|20|32|56|110, resnet18, vgg11|13|16|19, lstm"`
	Width   float64 `mapstructure:"width" json:"width" usage:"channel width multiplier of ResNet and VGG"`
	SeqLen  int     `mapstructure:"seq-len" json:"seq_len" usage:"lstm: BPTT length"`
	Hidden  int     `mapstructure:"hidden" json:"hidden" usage:"lstm: hidden and embedding size"`
	Layers  int     `mapstructure:"layers" json:"layers" usage:"lstm: layers"`
	Dropout float64 `mapstructure:"dropout" json:"dropout" usage:"lstm: dropout between layers"`
	// MLPHidden is omitted from JSON when empty so that the summaries written before it
	// existed still match their configuration.
	MLPHidden []int `mapstructure:"mlp-hidden" json:"mlp_hidden,omitempty" usage:"mlp: the hidden layers' sizes, e.g. 4096,4096 (empty: one layer of 128)"`
}

// DataOptions are the keys of the data and how it is batched.
type DataOptions struct {
	Dataset   string `mapstructure:"dataset" json:"dataset" usage:"data set: mnist (embedded), fashion-mnist, cifar10, cifar100, ptb, wikitext2, synthetic, synthetic-text"`
	DataDir   string `mapstructure:"data-dir" json:"data_dir" usage:"folder holding the data set's files (default for mnist: the copy in the Go module cache)"`
	Augment   string `mapstructure:"augment" json:"augment" usage:"image augmentation: auto (crop-flip for CIFAR), none, crop-flip"`
	BatchSize int    `mapstructure:"batch-size" json:"batch_size" usage:"samples per worker per step (streams for the lstm)"`
	Seed      int64  `mapstructure:"seed" json:"seed" usage:"seed of initialisation, shuffling and augmentation"`
}

// OptimOptions are the keys of how long and how the model is optimised.
type OptimOptions struct {
	// LR, Momentum, WeightDecay and ClipNorm at FamilyDefault (-1) mean "the model
	// family's default" (resolved by Resolve and written resolved into summary.json); any
	// other negative value is an error.
	Epochs       int       `mapstructure:"epochs" json:"epochs" usage:"epochs to train (0: one epoch, or as many as --max-steps needs)"`
	MaxSteps     int       `mapstructure:"max-steps" json:"max_steps" usage:"stop after this many steps (0: no limit)"`
	LR           float64   `mapstructure:"lr" json:"lr" usage:"learning rate (-1: 0.1 for CNNs, 0.02 for the mlp, 20 for the lstm)"`
	Momentum     float64   `mapstructure:"momentum" json:"momentum" usage:"SGD momentum (-1: 0.9 for CNNs, 0 for the lstm)"`
	Nesterov     bool      `mapstructure:"nesterov" json:"nesterov" usage:"use Nesterov momentum"`
	WeightDecay  float64   `mapstructure:"weight-decay" json:"weight_decay" usage:"weight decay added to the gradient (-1: 1e-4 for CNNs, 0 for the lstm)"`
	ClipNorm     float64   `mapstructure:"clip-norm" json:"clip_norm" usage:"clip the gradient norm to this (-1: 0.25 for the lstm, off for CNNs; 0: off)"`
	Schedule     string    `mapstructure:"schedule" json:"schedule" usage:"learning-rate schedule after warm-up: const, step, cosine"`
	WarmupEpochs float64   `mapstructure:"warmup-epochs" json:"warmup_epochs" usage:"linear learning-rate warm-up, in epochs"`
	Milestones   []float64 `mapstructure:"milestones" json:"milestones" usage:"epochs at which the step schedule multiplies the rate by --gamma"`
	Gamma        float64   `mapstructure:"gamma" json:"gamma" usage:"step-schedule decay factor"`
}

// DistOptions are the keys of the job's processes and the links between them.
type DistOptions struct {
	Workers    int           `mapstructure:"workers" json:"workers" usage:"worker processes"`
	Backend    string        `mapstructure:"backend" json:"backend" usage:"collectives backend: tcp, inproc, mpi"`
	Bandwidth  string        `mapstructure:"bandwidth" json:"bandwidth" usage:"emulated link bandwidth, e.g. 1Gbit (empty: unlimited)"`
	Latency    string        `mapstructure:"latency" json:"latency" usage:"emulated link latency, e.g. 100us"`
	BindAddr   string        `mapstructure:"bind-addr" json:"bind_addr" usage:"address listening sockets bind to"`
	Timeout    time.Duration `mapstructure:"timeout" json:"timeout" usage:"a peer silent for this long fails the job"`
	CheckEvery int           `mapstructure:"check-every" json:"check_every" usage:"compare parameter checksums across ranks every N steps"`
	// Threads and ComputeThreads shape how a worker uses the cores; both are omitted from
	// JSON at 0 so that the summaries written before they existed still match.
	Threads        int `mapstructure:"threads" json:"threads,omitempty" usage:"threads (GOMAXPROCS) of each worker process, which then share every core unbound (0: the cores split among the workers, each bound to its own)"`
	ComputeThreads int `mapstructure:"compute-threads" json:"compute_threads,omitempty" usage:"threads the model's kernels use in each worker, leaving the rest to the pipeline's goroutines (0: all the worker's threads)"`
}

// OutputOptions are the keys of what the run measures and writes, and where.
type OutputOptions struct {
	EvalEvery   int    `mapstructure:"eval-every" json:"eval_every" usage:"evaluate every N steps (0: after every epoch and at the end)"`
	EvalSamples int    `mapstructure:"eval-samples" json:"eval_samples" usage:"evaluate on at most this many test samples, tokens for the lstm (0: all)"`
	LogEvery    int    `mapstructure:"log-every" json:"log_every" usage:"log a line every N steps when the output is not a terminal"`
	Out         string `mapstructure:"out" json:"out" usage:"output folder"`
	// CheckpointEvery writes a checkpoint into Out/checkpoint every so many steps (0: never);
	// Resume continues the run whose checkpoint is in that folder.
	CheckpointEvery int `mapstructure:"checkpoint-every" json:"checkpoint_every" usage:"write a checkpoint into <out>/checkpoint every N steps (0: never)"`
	// TimelineSteps is omitted from JSON at 0 so that the summaries written before it
	// existed still match their configuration.
	TimelineSteps int    `mapstructure:"timeline-steps" json:"timeline_steps,omitempty" usage:"record what rank 0's last N steps spent their time on (compute, each selection, each collective, waits) into <out>/timeline.json, a Chrome trace, and timeline.png (0: none)"`
	Resume        string `mapstructure:"resume" json:"resume" usage:"continue the run whose checkpoint is in this folder, with its configuration unless flags change it"`
	// ResumeChanged lets Resume continue under result-shaping settings that differ from
	// the checkpoint's (see Changed); summary.json then records both configurations and
	// the step where they changed. Without it such a resumption is refused.
	ResumeChanged bool `mapstructure:"resume-changed" json:"resume_changed" usage:"with --resume: continue even though result-shaping settings changed since the checkpoint (summary.json records both)"`
	// ProfileOut, when set, is where rank 0 writes the model's measured compute per step (a
	// profile.Profile) after training succeeds.
	ProfileOut string `mapstructure:"profile-out" json:"profile_out" usage:"write rank 0's measured compute per step (forward, backward per gradient, update; mean after 2 warm-up steps) to this JSON file for the scale simulator; written only when training succeeds"`
	// TensorBoard has rank 0 write TensorBoard event files into Out/tensorboard: each
	// step's loss, learning rate, samples/s, bytes sent and density, each evaluation's
	// accuracy, loss and perplexity.
	TensorBoard bool `mapstructure:"tensorboard" json:"tensorboard" usage:"also write TensorBoard event files into <out>/tensorboard (loss, lr, samples/s, bytes, density; test accuracy and loss)"`
	// SaveBest has rank 0 write the weights of the best evaluation so far to
	// Out/model-best.safetensors: the highest test accuracy, or for a language model the
	// lowest test loss.
	SaveBest bool `mapstructure:"save-best" json:"save_best" usage:"also write the weights of the best evaluation so far to <out>/model-best.safetensors (highest test accuracy; lowest test loss for lstm)"`
}

// Defaults returns the configuration a bare `train` runs with.
func Defaults() Config {
	return Config{
		ModelOptions: ModelOptions{Model: "resnet20", Width: 1, SeqLen: 35, Hidden: 200, Layers: 2},
		DataOptions:  DataOptions{Dataset: "mnist", Augment: "auto", BatchSize: 32, Seed: 1},
		OptimOptions: OptimOptions{LR: FamilyDefault, Momentum: FamilyDefault, WeightDecay: FamilyDefault, ClipNorm: FamilyDefault,
			Schedule: "cosine", Gamma: 0.1},
		Settings:      pipelines.DefaultSettings(),
		DistOptions:   DistOptions{Workers: 1, Backend: "tcp", BindAddr: "127.0.0.1", Timeout: 60 * time.Second, CheckEvery: 100},
		OutputOptions: OutputOptions{LogEvery: 50},
	}
}

// IsLanguageModel reports whether the configured model is a language model.
func (c *Config) IsLanguageModel() bool { return c.Model == "lstm" }

// FamilyDefault is the value of lr, momentum, weight-decay and clip-norm that stands for
// the model family's default (see Resolve); any other negative value is an error.
const FamilyDefault = -1

// Resolve replaces "family default" markers by the values used by the reference
// implementations: SGD with momentum 0.9, lr 0.1 and weight decay 1e-4 for CNNs (He et al.),
// and for the MLP the same with lr 0.02; plain SGD with lr 20 and gradient clipping at
// 0.25 for the LSTM (PyTorch word_language_model).
func (c *Config) Resolve() {
	lm := c.IsLanguageModel()
	pick := func(v *float64, cnn, lstm float64) {
		if *v == FamilyDefault {
			if lm {
				*v = lstm
			} else {
				*v = cnn
			}
		}
	}
	if c.Model == "mlp" && c.LR == FamilyDefault {
		// A plain MLP has no BatchNorm to tame the scale of its updates: at 0.1 it
		// diverges on 3x32x32 inputs, whose pixels are strongly correlated.
		c.LR = 0.02
	}
	pick(&c.LR, 0.1, 20)
	pick(&c.Momentum, 0.9, 0)
	pick(&c.WeightDecay, 1e-4, 0)
	pick(&c.ClipNorm, 0, 0.25)
	if c.Augment == "auto" {
		if strings.HasPrefix(c.Dataset, "cifar") {
			c.Augment = "crop-flip"
		} else {
			c.Augment = "none"
		}
	}
}

// Validate reports every problem of a resolved configuration at once.
func (c *Config) Validate() error {
	errs := c.checkFinite()
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.BatchSize <= 0 {
		bad("batch-size must be positive, got %d", c.BatchSize)
	}
	if c.Epochs < 0 || c.MaxSteps < 0 {
		bad("epochs and max-steps must not be negative, got %d and %d", c.Epochs, c.MaxSteps)
	}
	if c.LR <= 0 {
		bad("lr must be positive (or -1: the model family's default), got %g", c.LR)
	}
	if c.Momentum < 0 || c.Momentum >= 1 {
		bad("momentum must be in [0, 1), got %g", c.Momentum)
	}
	if c.Nesterov && c.Momentum == 0 {
		bad("nesterov needs a momentum above 0")
	}
	if c.WeightDecay < 0 || c.ClipNorm < 0 {
		bad("weight-decay and clip-norm must not be negative, got %g and %g", c.WeightDecay, c.ClipNorm)
	}
	switch c.Schedule {
	case "const", "step", "cosine":
	default:
		bad("schedule must be const, step or cosine, got %q", c.Schedule)
	}
	if c.Gamma <= 0 || c.Gamma > 1 {
		bad("gamma must be in (0, 1], got %g", c.Gamma)
	}
	if c.WarmupEpochs < 0 {
		bad("warmup-epochs must not be negative, got %g", c.WarmupEpochs)
	}
	for i, m := range c.Milestones {
		if m <= 0 || (i > 0 && m <= c.Milestones[i-1]) {
			bad("milestones must be positive and increasing, got %v", c.Milestones)
			break
		}
	}
	if c.EvalEvery < 0 || c.EvalSamples < 0 || c.LogEvery < 0 {
		bad("eval-every, eval-samples and log-every must not be negative")
	}
	if c.Width <= 0 {
		bad("width must be positive, got %g", c.Width)
	}
	if c.TimelineSteps < 0 {
		bad("timeline-steps must not be negative, got %d", c.TimelineSteps)
	}
	if c.Threads < 0 || c.ComputeThreads < 0 {
		bad("threads and compute-threads must not be negative, got %d and %d", c.Threads, c.ComputeThreads)
	}
	if len(c.MLPHidden) > 0 && c.Model != "mlp" {
		bad("mlp-hidden sizes the mlp's layers; model %s has none", c.Model)
	}
	for _, h := range c.MLPHidden {
		if h <= 0 {
			bad("mlp-hidden sizes must be positive, got %v", c.MLPHidden)
			break
		}
	}
	if c.IsLanguageModel() && (c.SeqLen <= 0 || c.Hidden <= 0 || c.Layers <= 0) {
		bad("seq-len, hidden and layers must be positive for the lstm, got %d, %d, %d", c.SeqLen, c.Hidden, c.Layers)
	}
	if c.Dropout < 0 || c.Dropout >= 1 {
		bad("dropout must be in [0, 1), got %g", c.Dropout)
	}
	switch c.Augment {
	case "none", "crop-flip":
	default:
		bad("augment must be auto, none or crop-flip, got %q", c.Augment)
	}
	if c.CheckpointEvery < 0 {
		bad("checkpoint-every must not be negative, got %d", c.CheckpointEvery)
	}
	if c.MomentumCorrection && (c.Momentum <= 0 || c.Momentum >= 1) {
		bad("momentum-correction needs a momentum in (0, 1), got %g", c.Momentum)
	}
	if err := pipelines.Check(c.Settings); err != nil {
		errs = append(errs, err)
	}
	if c.Workers < 1 {
		bad("workers must be at least 1, got %d", c.Workers)
	}
	if c.Timeout <= 0 {
		bad("timeout must be positive, a duration such as 60s: it is how long a silent peer is waited for, got %v", c.Timeout)
	}
	if c.CheckEvery < 0 {
		bad("check-every must not be negative, got %d", c.CheckEvery)
	}
	return errors.Join(errs...)
}

// MarshalJSON writes the timeout as a Go duration string ("1m0s"), as users type it, rather
// than in nanoseconds.
func (c Config) MarshalJSON() ([]byte, error) {
	type plain Config // drops this method
	return json.Marshal(struct {
		plain
		Timeout string `json:"timeout"`
	}{plain(c), c.Timeout.String()})
}

// UnmarshalJSON reads what MarshalJSON writes. Keys absent from data, as in a summary or
// checkpoint written before they existed, take their defaults: what those runs did, since
// a key whose default changes results comes with a new ResultsVersion. So adding a key
// does not make every recorded run look stale.
func (c *Config) UnmarshalJSON(data []byte) error {
	type plain Config
	*c = Defaults()
	var aux struct {
		*plain
		Timeout string `json:"timeout"`
	}
	aux.plain = (*plain)(c)
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	if aux.Timeout == "" {
		return nil
	}
	d, err := time.ParseDuration(aux.Timeout)
	if err != nil {
		return fmt.Errorf("timeout %q: %w", aux.Timeout, err)
	}
	c.Timeout = d
	return nil
}

// Keys returns c as configuration keys (the flag names) and values, as a --config file
// holds them.
func (c Config) Keys() (map[string]any, error) {
	var m map[string]any
	if err := mapstructure.Decode(c, &m); err != nil {
		return nil, fmt.Errorf("encoding the configuration: %w", err)
	}
	m["timeout"] = c.Timeout.String()
	return m, nil
}
