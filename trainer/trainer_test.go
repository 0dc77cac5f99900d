package trainer

import (
	"context"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/pipeline"
)

// quick returns a configuration for a short run writing into a temporary folder.
func quick(t *testing.T, model, dataset string, steps int) Config {
	t.Helper()
	cfg := Defaults()
	cfg.Model, cfg.Dataset, cfg.MaxSteps = model, dataset, steps
	cfg.EvalSamples, cfg.LogEvery = 512, 0
	cfg.Out = t.TempDir()
	return cfg
}

func TestLossFalls(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for 100 steps")
	}
	for _, tc := range []struct {
		model, dataset string
		width, lr      float64
		minAccuracy    float64
	}{
		{"mlp", "mnist", 1, 0.05, 0.85},
		// BatchNorm's running statistics lag the fast-moving weights this early, so eval
		// accuracy trails training accuracy.
		{"resnet8", "mnist", 0.5, 0.1, 0.6},
	} {
		t.Run(tc.model, func(t *testing.T) {
			cfg := quick(t, tc.model, tc.dataset, 100)
			cfg.Width, cfg.LR = tc.width, tc.lr
			s, err := Run(context.Background(), cfg, Options{Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			if *s.FinalLoss > 0.5**s.InitialLoss {
				t.Errorf("loss fell from %.3f only to %.3f in 100 steps", *s.InitialLoss, *s.FinalLoss)
			}
			if *s.Eval.Accuracy < tc.minAccuracy {
				t.Errorf("test accuracy %.3f after 100 steps, want at least %.2f", *s.Eval.Accuracy, tc.minAccuracy)
			}
		})
	}
}

func TestLanguageModelLossFalls(t *testing.T) {
	cfg := quick(t, "lstm", "synthetic-text", 150)
	cfg.Hidden, cfg.SeqLen, cfg.BatchSize, cfg.Layers = 32, 10, 8, 1
	s, err := Run(context.Background(), cfg, Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if *s.FinalLoss > 0.6**s.InitialLoss {
		t.Errorf("loss fell from %.3f only to %.3f", *s.InitialLoss, *s.FinalLoss)
	}
	// Uniform guessing over the 200 words has perplexity 200.
	if s.Eval.Perplexity == nil || *s.Eval.Perplexity >= 40 {
		t.Errorf("perplexity %v, want below 40", s.Eval.Perplexity)
	}
}

func TestRunWritesSummaryAndMetrics(t *testing.T) {
	cfg := quick(t, "mlp", "synthetic", 7)
	cfg.EvalEvery = 3
	s, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(cfg.Out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("summary.json: %v", err)
	}
	for _, key := range []string{"config", "pipeline", "model", "dataset", "workers", "steps", "epochs",
		"initial_loss", "final_loss", "eval", "throughput", "traffic", "sparsity", "consistency"} {
		if _, ok := got[key]; !ok {
			t.Errorf("summary.json lacks %q", key)
		}
	}
	// The trained model, in safetensors: every parameter, float32, all of the file's data.
	weights, err := os.ReadFile(filepath.Join(cfg.Out, "model.safetensors"))
	if err != nil {
		t.Fatalf("no trained model: %v", err)
	}
	n := binary.LittleEndian.Uint64(weights)
	var header map[string]struct {
		DType       string `json:"dtype"`
		DataOffsets []int  `json:"data_offsets"`
	}
	if err := json.Unmarshal(weights[8:8+n], &header); err != nil {
		t.Fatalf("model.safetensors header: %v", err)
	}
	floats := 0
	for name, e := range header {
		if name != "__metadata__" && e.DType == "F32" {
			floats += (e.DataOffsets[1] - e.DataOffsets[0]) / 4
		}
	}
	if floats != s.Parameters || len(weights)-8-int(n) != 4*s.Parameters {
		t.Errorf("model.safetensors holds %d floats in %d bytes of data, the model %d parameters", floats, len(weights)-8-int(n), s.Parameters)
	}
	// Where the run came from: the toolchain, the machine, the kernel and the command line.
	prov, _ := got["provenance"].(map[string]any)
	for _, key := range []string{"version", "revision", "modified", "go_version", "os", "arch", "cpu", "gemm", "gomaxprocs", "command_line"} {
		if _, ok := prov[key]; !ok {
			t.Errorf("summary.json's provenance lacks %q: %v", key, prov)
		}
	}
	if s.Provenance.GoVersion != runtime.Version() || s.Provenance.GEMM == "" || s.Provenance.GOMAXPROCS < 1 {
		t.Errorf("provenance %+v", s.Provenance)
	}
	if s.Steps != 7 || !s.Complete || got["steps"].(float64) != 7 {
		t.Errorf("summary says %d steps, complete %v; want 7, true", s.Steps, s.Complete)
	}
	if s.Config.LR != 0.02 || s.Config.Momentum != 0.9 { // the MLP's family defaults
		t.Errorf("summary holds the unresolved config: lr %g momentum %g", s.Config.LR, s.Config.Momentum)
	}
	records := readMetrics(t, cfg.Out)
	var train, eval int
	for _, r := range records[1:] {
		switch r[0] {
		case "train":
			train++
		case "eval":
			eval++
		}
	}
	// Evaluations after steps 3 and 6, and the final one after step 7.
	if train != 7 || eval != 3 {
		t.Errorf("metrics.csv has %d train and %d eval rows, want 7 and 3", train, eval)
	}
}

func TestSameSeedSameTraining(t *testing.T) {
	var sums []string
	for range 2 {
		cfg := quick(t, "mlp", "synthetic", 5)
		s, err := Run(context.Background(), cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, s.Consistency.ParamChecksum)
	}
	if sums[0] != sums[1] {
		t.Fatalf("two runs with the same seed end with different parameters: %v", sums)
	}
}

func TestBadInputIsAClearError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		wants []string
	}{
		{"missing cifar folder", func(c *Config) { c.Dataset, c.DataDir = "cifar10", "/nonexistent" }, []string{"/nonexistent", "cifar"}},
		{"cifar without folder", func(c *Config) { c.Dataset = "cifar10" }, []string{"--data-dir", "ssfusion data fetch cifar10", "data/cifar10"}},
		{"unknown dataset", func(c *Config) { c.Dataset = "imagenet" }, []string{"imagenet", "cifar10"}},
		{"text model on images", func(c *Config) { c.Model = "lstm" }, []string{"lstm", "text"}},
		{"unknown model", func(c *Config) { c.Model = "alexnet" }, []string{"alexnet"}},
		{"bad batch", func(c *Config) { c.BatchSize = 0 }, []string{"batch-size"}},
		{"bad schedule", func(c *Config) { c.Schedule = "linear" }, []string{"schedule"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := quick(t, "mlp", "synthetic", 1)
			tc.edit(&cfg)
			_, err := Run(context.Background(), cfg, Options{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tc.wants {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

func TestInterruptedRunKeepsWhatItMeasured(t *testing.T) {
	cfg := quick(t, "mlp", "synthetic", 5)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s, err := Run(ctx, cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("error %v, want an interruption", err)
	}
	raw, rerr := os.ReadFile(filepath.Join(cfg.Out, "summary.json"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	if s.Complete || !strings.Contains(string(raw), `"complete": false`) {
		t.Fatalf("an interrupted run is not marked incomplete:\n%s", raw)
	}
}

func TestConfigJSONRoundTrip(t *testing.T) {
	cfg := Defaults()
	cfg.Milestones = []float64{1, 2}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"timeout":"1m0s"`) {
		t.Errorf("timeout not written as a duration: %s", raw)
	}
	var back Config
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if back.Timeout != cfg.Timeout || back.Model != cfg.Model || len(back.Milestones) != 2 {
		t.Errorf("round trip changed the config: %+v", back)
	}
}

// TestConfigJSONBeforeNewKeys: a summary or checkpoint written before a key existed
// (select-rule, error-feedback, exdyna-threshold; timeout stands for any other) reads it at
// its default, which reproduces those runs, so that it still counts as made by today's
// default configuration.
func TestConfigJSONBeforeNewKeys(t *testing.T) {
	raw, err := json.Marshal(Defaults())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"select_rule", "error_feedback", "exdyna_threshold", "safusion_align", "timeout"} {
		if _, ok := m[key]; !ok {
			t.Fatalf("the configuration has no %s to leave out", key)
		}
		delete(m, key)
	}
	if raw, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	var old Config
	if err := json.Unmarshal(raw, &old); err != nil {
		t.Fatal(err)
	}
	if changed, err := Changed(old, Defaults()); err != nil || len(changed) > 0 {
		t.Fatalf("a configuration from before the new keys differs from the defaults: %v, %v", changed, err)
	}
	// Written values win over the defaults.
	cfg := Defaults()
	cfg.SelectRule, cfg.ErrorFeedback = "rank", false
	if raw, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if back.SelectRule != "rank" || back.ErrorFeedback {
		t.Fatalf("read back select-rule %q, error-feedback %v", back.SelectRule, back.ErrorFeedback)
	}
}

func TestValidateSelectRuleAndErrorFeedback(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"rank", func(c *Config) { c.SelectRule = "rank" }, ""},
		{"cost", func(c *Config) { c.SelectRule = "cost" }, ""},
		{"unknown rule", func(c *Config) { c.SelectRule = "sizes" }, "select-rule"},
		{"empty rule", func(c *Config) { c.SelectRule = "" }, "select-rule"},
		{"no error feedback", func(c *Config) { c.ErrorFeedback = false }, ""},
		{"momentum correction without error feedback", func(c *Config) { c.ErrorFeedback, c.MomentumCorrection = false, true }, "error-feedback"},
		// Only SSFusion has a select rule, and dense sends everything.
		{"rule of another pipeline", func(c *Config) { c.Pipeline, c.SelectRule = "pertensor", "rank" }, "pipeline pertensor does not read select-rule"},
		{"no error feedback for dense", func(c *Config) { c.Pipeline, c.ErrorFeedback = "dense", false }, "pipeline dense does not read error-feedback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Defaults()
			cfg.Pipeline = "ssfusion"
			tc.edit(&cfg)
			cfg.Resolve()
			err := cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// readMetrics returns the records of dir/metrics.csv, the header first.
func readMetrics(t *testing.T, dir string) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "metrics.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return records
}

// TestDivergenceStops: a run whose loss runs away stops within a few steps of crossing the
// bound, with an error naming the step and advising a lower lr, and writes what it
// measured, marked incomplete.
func TestDivergenceStops(t *testing.T) {
	cfg := quick(t, "mlp", "synthetic", 200)
	cfg.LR = 5
	sum, err := Run(context.Background(), cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "diverged at step") || !strings.Contains(err.Error(), "--lr") {
		t.Fatalf("error %v, want a divergence naming the step and --lr", err)
	}
	if sum == nil || sum.Complete || sum.Steps >= cfg.MaxSteps {
		t.Fatalf("summary %+v: want an incomplete run stopped early", sum)
	}
	rows, err := os.ReadFile(filepath.Join(cfg.Out, "metrics.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(rows), "\ntrain,"); n != sum.Steps {
		t.Errorf("metrics.csv has %d training rows, the summary %d steps", n, sum.Steps)
	}
	// The step that crossed the bound is the last one run.
	var over int
	for _, line := range strings.Split(string(rows), "\n") {
		f := strings.Split(line, ",")
		if len(f) > 5 && f[0] == "train" {
			if loss, err := strconv.ParseFloat(f[5], 64); err == nil && loss > DivergenceFactor*max(*sum.InitialLoss, 1) {
				over++
			}
		}
	}
	if over != 1 {
		t.Errorf("%d steps above the bound were run, want the run to stop at the first", over)
	}
}

// TestDivergenceStopsEveryRank: in a data-parallel run the ranks agree on divergence, so
// all stop at the same step with the divergence as their error, none with a dead peer's.
func TestDivergenceStopsEveryRank(t *testing.T) {
	cfg := quick(t, "mlp", "synthetic", 200)
	cfg.LR, cfg.Workers = 5, 2
	comms := inproc.New(2)
	errs := make([]error, 2)
	sums := make([]*Summary, 2)
	var wg sync.WaitGroup
	for r, comm := range comms {
		wg.Go(func() {
			defer comm.Close()
			sums[r], errs[r] = Run(context.Background(), cfg, Options{Comm: comm})
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "diverged at step") {
			t.Fatalf("rank %d: %v, want the divergence", r, err)
		}
	}
	if sums[0] == nil || sums[1] == nil || sums[0].Steps != sums[1].Steps {
		t.Fatalf("the ranks stopped at different steps: %+v, %+v", sums[0], sums[1])
	}
}

// TestTensorsCarryDims: the pipeline learns each parameter's number of dimensions from the
// model, which SSFusion's rank rule selects by.
func TestTensorsCarryDims(t *testing.T) {
	cfg := quick(t, "resnet8", "synthetic", 1)
	cfg.Width = 0.25
	var got []pipeline.Tensor
	r, err := newRun(&cfg, Options{NewPipeline: func(_ *Config, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		got = tensors
		return pipeline.NewLocal(tensors), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	want := func(name string) int {
		switch {
		case name == "fc.weight":
			return 2
		case strings.HasSuffix(name, ".weight") && (strings.Contains(name, "conv") || strings.Contains(name, "shortcut.0")):
			return 4
		}
		return 1 // BatchNorm's scale and shift, the classifier's bias
	}
	kinds := map[int]int{}
	for _, ts := range got {
		if ts.Dims != want(ts.Name) {
			t.Errorf("%s: %d dimensions, want %d", ts.Name, ts.Dims, want(ts.Name))
		}
		kinds[ts.Dims]++
	}
	if kinds[4] == 0 || kinds[2] != 1 || kinds[1] == 0 {
		t.Fatalf("tensors by dimensions %v: want convolution kernels, one classifier weight and vectors", kinds)
	}
}

// TestLiveOutputs: while a run goes on, metrics.csv holds every step so far and, after an
// evaluation, summary.json says how far it got with "complete": false; at the end both are
// whole and complete.
func TestLiveOutputs(t *testing.T) {
	cfg := quick(t, "mlp", "synthetic", 8)
	cfg.EvalEvery = 3
	checked := 0
	opts := Options{AfterStep: func(step int) {
		if step == 1 { // before any evaluation: the run is under way
			raw, err := os.ReadFile(filepath.Join(cfg.Out, "summary.json"))
			if err != nil || !strings.Contains(string(raw), `"complete": false`) {
				t.Errorf("summary.json at the first step: %v\n%s", err, raw)
			}
		}
		if step != 4 { // after the evaluation of step 3
			return
		}
		checked++
		rows := readMetrics(t, cfg.Out)
		trains := 0
		for _, r := range rows[1:] {
			if r[0] == "train" {
				trains++
			}
		}
		if trains != step {
			t.Errorf("after step %d metrics.csv holds %d training rows", step, trains)
		}
		raw, err := os.ReadFile(filepath.Join(cfg.Out, "summary.json"))
		if err != nil {
			t.Fatalf("no summary.json during the run: %v", err)
		}
		var s Summary
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		if s.Complete || s.Steps != 3 || s.Eval.Accuracy == nil {
			t.Errorf("summary.json during the run: complete %v, %d steps, accuracy %v; want false, 3, an accuracy", s.Complete, s.Steps, s.Eval.Accuracy)
		}
	}}
	s, err := Run(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if checked != 1 || !s.Complete {
		t.Fatalf("checked %d times, complete %v", checked, s.Complete)
	}
	if rows := readMetrics(t, cfg.Out); len(rows) != 1+8+3 { // the header, 8 steps, evaluations after 3, 6 and 8
		t.Errorf("metrics.csv has %d lines at the end, want 12", len(rows))
	}
}

// TestTensorBoard: with tensorboard on, rank 0 writes an event file holding the training
// and evaluation scalars; without it, none.
func TestTensorBoard(t *testing.T) {
	for _, on := range []bool{true, false} {
		cfg := quick(t, "mlp", "synthetic", 4)
		cfg.TensorBoard = on
		if _, err := Run(context.Background(), cfg, Options{}); err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join(cfg.Out, "tensorboard", "events.out.tfevents.*"))
		if (len(files) == 1) != on {
			t.Fatalf("tensorboard %v: event files %v", on, files)
		}
		if !on {
			continue
		}
		data, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, tag := range []string{"brain.Event:2", "train/loss", "train/lr", "train/samples_per_s", "eval/accuracy"} {
			if !strings.Contains(string(data), tag) {
				t.Errorf("the event file lacks %q", tag)
			}
		}
	}
}

// With SaveBest, model-best.safetensors holds the weights of the evaluation with the
// highest accuracy, the earliest among equals, and says which it was.
func TestSaveBestKeepsTheBestEvaluation(t *testing.T) {
	cfg := quick(t, "mlp", "synthetic", 30)
	cfg.EvalEvery, cfg.EvalSamples, cfg.SaveBest, cfg.LR = 3, 64, true, 0.1
	if _, err := Run(context.Background(), cfg, Options{Logf: t.Logf}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(cfg.Out, "metrics.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	table, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, name := range table[0] {
		col[name] = i
	}
	bestStep, bestAcc, evals := "", -1.0, 0
	for _, row := range table[1:] {
		if row[col["kind"]] != "eval" {
			continue
		}
		evals++
		if acc, _ := strconv.ParseFloat(row[col["eval_accuracy"]], 64); acc > bestAcc {
			bestStep, bestAcc = row[col["step"]], acc
		}
	}
	weights, err := os.ReadFile(filepath.Join(cfg.Out, "model-best.safetensors"))
	if err != nil {
		t.Fatalf("no best model after %d evaluations: %v", evals, err)
	}
	n := binary.LittleEndian.Uint64(weights)
	var header struct {
		Meta map[string]string `json:"__metadata__"`
	}
	if err := json.Unmarshal(weights[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	acc, _ := strconv.ParseFloat(header.Meta["best_accuracy"], 64)
	if header.Meta["best_step"] != bestStep || math.Abs(acc-bestAcc) > 1e-6 {
		t.Errorf("model-best.safetensors is from step %s (accuracy %v); metrics.csv's best is step %s (%v)",
			header.Meta["best_step"], acc, bestStep, bestAcc)
	}
	if bestStep == table[len(table)-1][col["step"]] {
		t.Logf("the best evaluation is the last; the test shows less than it could")
	}
}

// TestRanksDisagreeingOnTheJobFail: ranks started with different result-shaping settings
// all fail before training, with an error naming the rank that differs, its host and the
// setting; settings that shape no result (where the outputs go, how often to log) may
// differ.
func TestRanksDisagreeingOnTheJobFail(t *testing.T) {
	base := quick(t, "mlp", "synthetic", 3)
	base.Workers = 3
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string // empty: the job runs
	}{
		{"learning rate", func(c *Config) { c.LR = 0.5 }, "rank 2 (on "},
		{"log interval", func(c *Config) { c.LogEvery = 7 }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comms := inproc.New(3)
			errs := make([]error, 3)
			var wg sync.WaitGroup
			for r, comm := range comms {
				cfg := base
				cfg.Out = t.TempDir()
				if r == 2 {
					tc.change(&cfg)
				}
				wg.Go(func() {
					defer comm.Close()
					_, errs[r] = Run(context.Background(), cfg, Options{Comm: comm})
				})
			}
			wg.Wait()
			for r, err := range errs {
				switch {
				case tc.want == "" && err != nil:
					t.Errorf("rank %d: %v", r, err)
				case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "lr: ")):
					t.Errorf("rank %d: %v, want an error naming rank 2, its host and lr", r, err)
				}
			}
		})
	}
}

// TestMLPHidden: without --mlp-hidden, or with an empty list, the MLP has its one default
// hidden layer of 128; with sizes, those layers.
func TestMLPHidden(t *testing.T) {
	for _, tc := range []struct {
		hidden []int
		params int
	}{
		{nil, 784*128 + 128 + 128*10 + 10},
		{[]int{}, 784*128 + 128 + 128*10 + 10},
		{[]int{64, 32}, 784*64 + 64 + 64*32 + 32 + 32*10 + 10},
	} {
		cfg := quick(t, "mlp", "mnist", 1)
		cfg.MLPHidden = tc.hidden
		r, err := newRun(&cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.numParams(); got != tc.params {
			t.Errorf("mlp-hidden %v: %d parameters, want %d", tc.hidden, got, tc.params)
		}
		r.close()
	}
}
