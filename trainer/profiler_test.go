package trainer

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"

	"github.com/ssfusion/ssfusion/nets"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/profile"
)

// profiledRun trains the mlp for steps steps with --profile-out and returns the profile and
// the run's summary.
func profiledRun(t *testing.T, steps int, opts Options) (*profile.Profile, *Summary, Config) {
	t.Helper()
	cfg := quick(t, "mlp", "synthetic", steps)
	cfg.ProfileOut = filepath.Join(t.TempDir(), "mlp.json")
	s, err := Run(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	p, err := profile.Load(cfg.ProfileOut)
	if err != nil {
		t.Fatal(err)
	}
	return p, s, cfg
}

func TestProfileOut(t *testing.T) {
	p, s, cfg := profiledRun(t, 8, Options{})
	r, err := newRun(&cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	params := r.params
	r.close()
	if p.Model != "mlp" || p.BatchSize != cfg.BatchSize || !strings.Contains(p.Source, "mean of 6 of 8 steps") {
		t.Errorf("profile says model %q, batch %d, source %q", p.Model, p.BatchSize, p.Source)
	}
	if len(p.Tensors) != len(params) || p.Params() != s.Parameters {
		t.Fatalf("profile has %d tensors of %d elements, the model %d of %d", len(p.Tensors), p.Params(), len(params), s.Parameters)
	}
	// Backprop announces the gradients in the reverse of Params order.
	for i, tensor := range p.Tensors {
		want := params[len(params)-1-i]
		if tensor.Name != want.Name || tensor.Numel != want.Numel() || tensor.Dims != len(want.Shape) {
			t.Errorf("tensor %d is %s of %d elements in %d dimensions, want %s of %d in %d", i, tensor.Name, tensor.Numel, tensor.Dims, want.Name, want.Numel(), len(want.Shape))
		}
	}
	// Save checked that every time is finite and non-negative; the sum of the fields should be
	// near the compute the run measured around TrainStep over the same steps. Both are means:
	// against a median, one slow step of a 2 ms model put the profile outside the bounds.
	compute := meanComputeMS(t, cfg.Out, warmupSteps)
	got := p.ForwardMS + p.BackwardMS()
	if got <= 0 || got < 0.3*compute || got > 2*compute {
		t.Errorf("forward and backward take %.3f ms by the profile, the run measured a median %.3f ms", got, compute)
	}
}

// meanComputeMS is the mean compute_ms of metrics.csv's training rows after the first skip.
func meanComputeMS(t *testing.T, dir string, skip int) float64 {
	t.Helper()
	records := readMetrics(t, dir)
	col := slices.Index(records[0], "compute_ms")
	var ms []float64
	for _, rec := range records[1:] {
		if rec[0] == "train" {
			v, err := strconv.ParseFloat(rec[col], 64)
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, v)
		}
	}
	if len(ms) <= skip {
		t.Fatalf("metrics.csv has %d training rows, the profile leaves out %d", len(ms), skip)
	}
	var sum float64
	for _, v := range ms[skip:] {
		sum += v
	}
	return sum / float64(len(ms)-skip)
}

// slowPush is the local pipeline with a Push that sleeps for one tensor, as a pipeline
// selecting inside Push would spend time there.
type slowPush struct {
	pipeline.Pipeline
	id    int
	sleep time.Duration
}

func (p slowPush) Push(id int, grad []float32) error {
	if id == p.id {
		time.Sleep(p.sleep)
	}
	return p.Pipeline.Push(id, grad)
}

func TestProfileLeavesOutPushTime(t *testing.T) {
	const sleep = 100 * time.Millisecond // long beside the noise of a loaded machine
	base, _, _ := profiledRun(t, 5, Options{})
	// The first gradient of backprop is the last parameter; its successor follows the sleep.
	slow, s, _ := profiledRun(t, 5, Options{NewPipeline: func(_ *Config, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		return slowPush{pipeline.NewLocal(tensors), len(tensors) - 1, sleep}, nil
	}})
	if s.Throughput.StepMS.Compute < ms(sleep) {
		t.Fatalf("the run measured %.1f ms of compute per step, less than the %v sleep in Push", s.Throughput.StepMS.Compute, sleep)
	}
	// Half the sleep as margin: the machine may be noisy, but not by a whole sleep over
	// the mean of three steps.
	margin := ms(sleep) / 2
	if b, sl := base.Tensors[1].BackwardMS, slow.Tensors[1].BackwardMS; sl > b+margin {
		t.Errorf("%s takes %.3f ms after a slow Push, %.3f ms after a fast one", slow.Tensors[1].Name, sl, b)
	}
	if b, sl := base.ForwardMS+base.BackwardMS(), slow.ForwardMS+slow.BackwardMS(); sl > b+margin {
		t.Errorf("forward and backward take %.3f ms with a slow Push, %.3f ms with a fast one", sl, b)
	}
}

func TestProfileOutFolderMustExist(t *testing.T) {
	cfg := quick(t, "mlp", "synthetic", 2)
	cfg.ProfileOut = filepath.Join(t.TempDir(), "missing", "p.json")
	steps := 0
	_, err := Run(context.Background(), cfg, Options{AfterStep: func(int) { steps++ }})
	if err == nil || !strings.Contains(err.Error(), "profile-out") || steps > 0 {
		t.Fatalf("after %d steps, error %v; want a profile-out error before training", steps, err)
	}
}

func TestProfilerNoTimingWithoutFlag(t *testing.T) {
	cfg := quick(t, "mlp", "synthetic", 1)
	r, err := newRun(&cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	if r.prof != nil {
		t.Fatal("a run without profile-out has a profiler")
	}
}

// record feeds the profiler one step whose hooks announce ids.
func record(p *profiler, step int, ids ...int) {
	p.beginStep(step)
	p.beginCompute(time.Now())
	for _, id := range ids {
		now := time.Now()
		p.hooked(id, now, now)
	}
	p.beginUpdate(time.Now())
	p.endStep()
}

func TestProfilerRejectsAChangedOrder(t *testing.T) {
	p := newProfiler(3, 10)
	record(p, 0, 2, 1, 0)
	record(p, 1, 2, 1, 0)
	record(p, 2, 2, 0, 1)
	record(p, 3, 2, 1, 0)
	_, _, err := p.result(nil)
	if err == nil || !strings.Contains(err.Error(), "step 2") {
		t.Fatalf("error %v, want one naming step 2", err)
	}
	p = newProfiler(3, 10)
	record(p, 0, 2, 1)
	if _, _, err := p.result(nil); err == nil || !strings.Contains(err.Error(), "2 gradients") {
		t.Fatalf("error %v, want one about a missing gradient", err)
	}
}

func TestProfilerMeanSkipsWarmup(t *testing.T) {
	for _, tc := range []struct {
		forward []time.Duration // per step, in ms
		want    float64
		used    int
	}{
		{[]time.Duration{100, 50, 3, 1, 2}, 2, 3},
		{[]time.Duration{100, 50, 4, 2}, 3, 2},
		{[]time.Duration{3, 1, 2}, 2, 3}, // too few steps to spare a warm-up
	} {
		p := newProfiler(1, 0)
		p.order = []int{0}
		for _, f := range tc.forward {
			p.times = append(p.times, f*time.Millisecond, 0, 0, 0)
		}
		prof, used, err := p.result([]nets.Param{{Name: "w", Value: make([]float32, 4)}})
		if err != nil {
			t.Fatal(err)
		}
		if prof.ForwardMS != tc.want || used != tc.used || prof.Tensors[0].Numel != 4 {
			t.Errorf("steps %v: forward %g ms over %d steps, want %g over %d", tc.forward, prof.ForwardMS, used, tc.want, tc.used)
		}
	}
}

func TestProfileOutKey(t *testing.T) {
	var cfg Config
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{ErrorUnused: true, Result: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(map[string]any{"profile-out": "p.json"}); err != nil || cfg.ProfileOut != "p.json" {
		t.Fatalf("decoding profile-out: %v, got %q", err, cfg.ProfileOut)
	}
	keys, err := cfg.Keys()
	if err != nil || keys["profile-out"] != "p.json" {
		t.Fatalf("Keys: %v, profile-out %v", err, keys["profile-out"])
	}
	// The environment variable, as train's loadConfig reads it.
	t.Setenv("SSF_PROFILE_OUT", "env.json")
	v := viper.New()
	v.SetEnvPrefix("SSF")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()
	defaults, err := Defaults().Keys()
	if err != nil {
		t.Fatal(err)
	}
	for k, val := range defaults {
		v.SetDefault(k, val)
	}
	var got Config
	if err := v.UnmarshalExact(&got); err != nil || got.ProfileOut != "env.json" {
		t.Fatalf("SSF_PROFILE_OUT: %v, got %q", err, got.ProfileOut)
	}
}

func TestJitterMatrix(t *testing.T) {
	got := jitterMatrix([][]float64{{10, 30}, {20, 40}}) // rank 0 then rank 1; rank 0's mean 20
	want := [][]float64{{0.5, 1}, {1.5, 2}}
	if len(got) != 2 || got[0][0] != want[0][0] || got[0][1] != want[0][1] || got[1][0] != want[1][0] || got[1][1] != want[1][1] {
		t.Errorf("jitter %v, want %v (by step, then rank)", got, want)
	}
	for _, bad := range [][][]float64{nil, {{}}, {{1, 2}, {1}}, {{1, 0}}} {
		if m := jitterMatrix(bad); m != nil {
			t.Errorf("jitterMatrix(%v) = %v, want nil", bad, m)
		}
	}
	long := make([]float64, 3*maxJitter)
	for i := range long {
		long[i] = 1
	}
	if m := jitterMatrix([][]float64{long}); len(m) != maxJitter {
		t.Errorf("%d steps kept of %d, want %d", len(m), len(long), maxJitter)
	}
}
