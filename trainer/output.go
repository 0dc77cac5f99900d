package trainer

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"

	"github.com/ssfusion/ssfusion/internal/atomicfile"
	"github.com/ssfusion/ssfusion/internal/provenance"
	"github.com/ssfusion/ssfusion/internal/safetensors"
	"github.com/ssfusion/ssfusion/nets"
	"github.com/ssfusion/ssfusion/pipeline"
)

// Summary is summary.json: the resolved configuration and what the run achieved. Figures that
// a run cannot measure (no evaluation yet, a pipeline that does not sparsify, one worker) are
// null.
type Summary struct {
	Config      Config      `json:"config"`
	Pipeline    string      `json:"pipeline"`
	Model       string      `json:"model"`
	Dataset     string      `json:"dataset"`
	Workers     int         `json:"workers"`
	Parameters  int         `json:"parameters"`
	Steps       int         `json:"steps"`
	Epochs      float64     `json:"epochs"`
	WallSeconds float64     `json:"wall_s"`
	InitialLoss *float64    `json:"initial_loss"`
	FinalLoss   *float64    `json:"final_loss"`
	Eval        Eval        `json:"eval"`
	Throughput  Throughput  `json:"throughput"`
	Traffic     Traffic     `json:"traffic"`
	Sparsity    Sparsity    `json:"sparsity"`
	Consistency Consistency `json:"consistency"`
	Complete    bool        `json:"complete"`
	// ResultsVersion is the ResultsVersion of the build that wrote the summary.
	ResultsVersion int `json:"results_version"`
	// ConfigChanges lists the resumptions under changed settings (--resume-changed): the
	// steps before each ran with its Previous configuration, not with Config.
	ConfigChanges []ConfigChange `json:"config_changes,omitempty"`
	// Provenance is the build and the machine of rank 0 that produced the run.
	Provenance provenance.Info `json:"provenance"`
	// Extra holds the means over steps of the figures particular to the pipeline
	// (pipeline.StepMetrics.Extra), by name, such as the bytes of ExDyna's index messages
	// in our encoding and in its authors'; the partition imbalance is under sparsity.
	Extra map[string]float64 `json:"extra,omitempty"`
	Error string             `json:"error,omitempty"`
}

// Eval is the last evaluation on the test split.
type Eval struct {
	Step       *int     `json:"step"`
	Samples    int      `json:"samples"`
	Accuracy   *float64 `json:"accuracy"`
	Loss       *float64 `json:"loss"`
	Perplexity *float64 `json:"perplexity"`
}

// Throughput averages the steps after the first (which pays one-off allocation).
type Throughput struct {
	SamplesPerS float64 `json:"samples_per_s"`
	StepMS      StepMS  `json:"step_ms"`
}

// StepMS is the mean time breakdown of a step in milliseconds.
type StepMS struct {
	Total    float64 `json:"total"`
	Compute  float64 `json:"compute"`
	Sparsify float64 `json:"sparsify"`
	Comm     float64 `json:"comm"`
	Wait     float64 `json:"wait"`
}

// Traffic is what a rank sent per step, against what dense allreduce would have sent.
type Traffic struct {
	BytesSentPerStep  *float64 `json:"bytes_sent_per_step"`
	DenseBytesPerStep *float64 `json:"dense_bytes_per_step"`
}

// Sparsity is the density asked for and achieved, and the tensors that sent nothing.
type Sparsity struct {
	DensityTarget         *float64 `json:"density_target"`
	DensityAchieved       *float64 `json:"density_achieved"`
	Tensors               int      `json:"tensors"`
	TensorsMissingPerStep *float64 `json:"tensors_missing_per_step"`
	// PartitionImbalance is ExDyna's mean over steps of the largest partition's selected
	// count over the mean partition's; null for other pipelines.
	PartitionImbalance *float64 `json:"partition_imbalance"`
}

// Consistency tells whether all ranks held bit-identical parameters when checked.
type Consistency struct {
	ParamChecksum      string `json:"param_checksum"`
	ParamChecksumEqual *bool  `json:"param_checksum_equal"`
}

// Row is one line of metrics.csv: a training step, or an evaluation (Kind "eval").
type Row struct {
	Kind     string
	Step     int
	Epoch    float64
	WallS    float64
	LR       float64
	Loss     float64
	GradNorm float64
	Samples  int
	StepMS   StepMS
	Bytes    int64
	Density  *float64
	Missing  *int
	Imbal    *float64 // partition imbalance, ExDyna only
	EvalAcc  *float64
	EvalLoss *float64
	EvalPPL  *float64
}

var csvHeader = []string{"kind", "step", "epoch", "wall_s", "lr", "loss", "grad_norm", "samples",
	"step_ms", "compute_ms", "sparsify_ms", "comm_ms", "wait_ms", "bytes_sent", "density_achieved",
	"tensors_missing", "eval_accuracy", "eval_loss", "eval_perplexity", pipeline.PartitionImbalance}

func (r Row) record() []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 7, 64) }
	opt := func(v *float64) string {
		if v == nil {
			return ""
		}
		return f(*v)
	}
	missing := ""
	if r.Missing != nil {
		missing = strconv.Itoa(*r.Missing)
	}
	if r.Kind == "eval" {
		return []string{r.Kind, strconv.Itoa(r.Step), f(r.Epoch), f(r.WallS), "", "", "", strconv.Itoa(r.Samples),
			"", "", "", "", "", "", "", "", opt(r.EvalAcc), opt(r.EvalLoss), opt(r.EvalPPL), ""}
	}
	return []string{r.Kind, strconv.Itoa(r.Step), f(r.Epoch), f(r.WallS), f(r.LR), f(r.Loss), f(r.GradNorm),
		strconv.Itoa(r.Samples), f(r.StepMS.Total), f(r.StepMS.Compute), f(r.StepMS.Sparsify), f(r.StepMS.Comm),
		f(r.StepMS.Wait), strconv.FormatInt(r.Bytes, 10), opt(r.Density), missing, "", "", "", opt(r.Imbal)}
}

// encodeCSV renders rows as metrics.csv.
func encodeCSV(rows []Row) ([]byte, error) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.Write(csvHeader); err != nil {
		return nil, err
	}
	for _, r := range rows {
		if err := w.Write(r.record()); err != nil {
			return nil, err
		}
	}
	w.Flush()
	return buf.Bytes(), w.Error()
}

// writeOutputs writes summary.json and metrics.csv into dir, each atomically.
func writeOutputs(dir string, s *Summary, rows []Row) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating output folder: %w", err)
	}
	if err := writeSummary(dir, s); err != nil {
		return err
	}
	return writeMetrics(dir, rows)
}

// writeSummary writes s as dir/summary.json, atomically.
func writeSummary(dir string, s *Summary) error {
	js, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding summary: %w", err)
	}
	return WriteFileAtomic(filepath.Join(dir, "summary.json"), append(js, '\n'))
}

// writeMetrics writes rows as dir/metrics.csv, atomically.
func writeMetrics(dir string, rows []Row) error {
	table, err := encodeCSV(rows)
	if err != nil {
		return fmt.Errorf("encoding metrics: %w", err)
	}
	return WriteFileAtomic(filepath.Join(dir, "metrics.csv"), table)
}

// WriteFileAtomic writes data to path through a temporary file in the same folder and a
// rename, so that a reader (or an interrupted run) never sees half a file.
func WriteFileAtomic(path string, data []byte) error { return atomicfile.Write(path, data) }

// Weights files: the trained model a finished run leaves in its folder, and with SaveBest
// the model of its best evaluation.
const (
	weightsFile     = "model.safetensors"
	bestWeightsFile = "model-best.safetensors"
)

// writeWeights writes the parameters and buffers (BatchNorm's running statistics) to file in
// the run's folder, in safetensors, under the names and shapes the model gives them, so that
// tools outside Go (PyTorch's safetensors.torch.load_file among them) can load the model.
// The metadata say what the weights are and, for the best evaluation's, how good.
func (r *run) writeWeights(file string, extra map[string]string) error {
	var tensors []safetensors.Tensor
	for _, set := range [][]nets.Param{r.params, r.model.Buffers()} {
		for _, p := range set {
			tensors = append(tensors, safetensors.Tensor{Name: p.Name, Shape: p.Shape, Data: p.Value})
		}
	}
	meta := map[string]string{"model": r.cfg.Model, "dataset": r.cfg.Dataset, "pipeline": r.cfg.Pipeline, "steps": strconv.Itoa(r.step)}
	maps.Copy(meta, extra)
	path := filepath.Join(r.cfg.Out, file)
	if err := safetensors.Write(path, tensors, meta); err != nil {
		return fmt.Errorf("writing the model to %s: %w", path, err)
	}
	return nil
}
