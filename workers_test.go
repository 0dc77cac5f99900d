package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/creack/pty"
	"github.com/ssfusion/ssfusion/dist/tcp"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipelines"
	"github.com/ssfusion/ssfusion/plots"
	"github.com/ssfusion/ssfusion/trainer"
)

func readSummary(t testing.TB, dir string) trainer.Summary {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s trainer.Summary
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("summary.json: %v", err)
	}
	return s
}

// Two ranks of 16 samples with the dense pipeline take the same steps as one process with
// batches of 32: the shards interleave one epoch order and the pipeline averages gradients.
// The MLP has no BatchNorm, whose statistics would differ between the two.
func TestTwoRanksMatchOneProcessAtTheSameGlobalBatch(t *testing.T) {
	run := func(workers, batch int) trainer.Summary {
		cfg := trainer.Defaults()
		cfg.Model, cfg.Dataset, cfg.MaxSteps, cfg.EvalSamples, cfg.LR = "mlp", "mnist", 30, 1000, 0.05
		cfg.Workers, cfg.BatchSize, cfg.Backend, cfg.CheckEvery = workers, batch, "inproc", 10
		cfg.Out = t.TempDir()
		if err := train(context.Background(), cfg); err != nil {
			t.Fatalf("%d workers: %v", workers, err)
		}
		return readSummary(t, cfg.Out)
	}
	one, two := run(1, 32), run(2, 16)
	if two.Consistency.ParamChecksumEqual == nil || !*two.Consistency.ParamChecksumEqual {
		t.Errorf("the two ranks' parameters were not found equal: %+v", two.Consistency)
	}
	if two.Workers != 2 || two.Traffic.BytesSentPerStep == nil || *two.Traffic.BytesSentPerStep == 0 {
		t.Errorf("the 2-rank run reports %d workers and %v bytes per step", two.Workers, two.Traffic.BytesSentPerStep)
	}
	close := func(name string, a, b float64) {
		if math.Abs(a-b) > 1e-4*math.Max(1, math.Abs(a)) {
			t.Errorf("%s: one process %.7g, two ranks %.7g", name, a, b)
		}
	}
	close("eval loss", *one.Eval.Loss, *two.Eval.Loss)
	close("eval accuracy", *one.Eval.Accuracy, *two.Eval.Accuracy)
	if *one.Eval.Loss == *one.Eval.Loss && one.Eval.Samples != two.Eval.Samples {
		t.Errorf("evaluated %d and %d samples", one.Eval.Samples, two.Eval.Samples)
	}
}

func TestBackendErrors(t *testing.T) {
	for _, tc := range []struct {
		backend, bandwidth, want string
	}{
		{"bogus", "", `unknown backend "bogus"`},
		{"mpi", "", "mpirun -np 2"},
		{"tcp", "fast", "--bandwidth"},
	} {
		cfg := trainer.Defaults()
		cfg.Backend, cfg.Model, cfg.Dataset, cfg.MaxSteps, cfg.Out = tc.backend, "mlp", "synthetic", 1, t.TempDir()
		cfg.Bandwidth, cfg.Workers = tc.bandwidth, 2
		err := train(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--backend %s: error %v, want one saying %q", tc.backend, err, tc.want)
		}
	}
}

// Every registered pipeline must leave all ranks with bit-identical parameters after every
// step, and report what it sent. On the MLP, whose biases have small gradients next to its
// weight matrices, the pipelines that select by one threshold over many tensors
// (multi-tensor, OMGS-SGD, Cupcake, ExDyna, Ok-Topk, SparDL) miss tensors; those that select in every tensor never do.
func TestEveryPipelineKeepsRanksIdentical(t *testing.T) {
	for _, name := range pipelines.Names() {
		t.Run(name, func(t *testing.T) {
			cfg := trainer.Defaults()
			cfg.Model, cfg.Dataset, cfg.MaxSteps, cfg.EvalSamples = "mlp", "mnist", 12, 200
			cfg.Workers, cfg.BatchSize, cfg.Backend, cfg.CheckEvery = 3, 8, "inproc", 1
			cfg.Density, cfg.SelectThreshold, cfg.Out = 0.01, 1000, t.TempDir()
			var err error
			if cfg.Settings, err = cfg.Settings.For(name); err != nil { // the keys it reads
				t.Fatal(err)
			}
			// The rate the traffic bound below was set for: ExDyna's threshold, which starts
			// from the target alone, takes its first steps to settle at other rates.
			cfg.LR = 0.1
			if err := train(context.Background(), cfg); err != nil {
				t.Fatal(err)
			}
			s := readSummary(t, cfg.Out)
			if s.Consistency.ParamChecksumEqual == nil || !*s.Consistency.ParamChecksumEqual {
				t.Fatalf("ranks diverged: %+v", s.Consistency)
			}
			if s.Traffic.BytesSentPerStep == nil || *s.Traffic.BytesSentPerStep <= 0 {
				t.Errorf("bytes sent per step: %v", s.Traffic.BytesSentPerStep)
			}
			// What follows holds for the pipelines that compress: those that read a
			// density, and PowerSGD with its rank.
			if spec, _ := pipelines.Lookup(name); !spec.ReadsKey("density") && !spec.ReadsKey("powersgd-rank") {
				return
			}
			sp := s.Sparsity
			if sp.DensityAchieved == nil || sp.TensorsMissingPerStep == nil {
				t.Fatalf("a sparsifying pipeline reports no density: %+v", sp)
			}
			if *s.Traffic.BytesSentPerStep >= *s.Traffic.DenseBytesPerStep/4 {
				t.Errorf("sent %g bytes per step, dense would send %g", *s.Traffic.BytesSentPerStep, *s.Traffic.DenseBytesPerStep)
			}
			// The pipelines that select once over several tensors miss some: multi-tensor,
			// OMGS-SGD and Cupcake, whose groups hold several tensors, ExDyna, Ok-Topk and SparDL.
			if missing := *sp.TensorsMissingPerStep; slices.Contains([]string{"multitensor", "omgs", "cupcake", "exdyna", "oktopk", "spardl"}, name) != (missing > 0) {
				t.Errorf("%g tensors missing per step", missing)
			}
			// ExDyna's figures of its own reach the summary as means over the steps.
			if ours, theirs := s.Extra[pipeline.IndexBytes], s.Extra[pipeline.AuthorsIndexBytes]; (name == "exdyna") != (ours > 0 && theirs > 0) {
				t.Errorf("index bytes in the summary: %g ours, %g the authors'", ours, theirs)
			}
		})
	}
}

// TestExDynaHoldsDensityOnEveryModelFamily: ExDyna's measured threshold sends the density
// it is given, within a tenth, in every step from the first on every model family the
// trainer offers: the MLP, the CIFAR ResNets, ResNet-18, VGG and the LSTM, whose
// embedding's gradient is mostly exact zeros.
func TestExDynaHoldsDensityOnEveryModelFamily(t *testing.T) {
	const density, steps = 0.01, 8
	for _, tc := range []struct {
		model, dataset string
		width          float64
	}{
		{"mlp", "mnist", 1},
		{"resnet8", "mnist", 0.5},
		{"resnet18", "mnist", 0.25},
		{"vgg11", "mnist", 0.25},
		{"lstm", "synthetic-text", 1},
	} {
		t.Run(tc.model, func(t *testing.T) {
			cfg := trainer.Defaults()
			cfg.Model, cfg.Dataset, cfg.Width = tc.model, tc.dataset, tc.width
			cfg.MaxSteps, cfg.EvalSamples, cfg.LR = steps, 64, 0.05
			cfg.Workers, cfg.BatchSize, cfg.Backend = 2, 8, "inproc"
			cfg.Hidden, cfg.SeqLen, cfg.Layers = 32, 10, 1 // the LSTM's; the others ignore them
			cfg.Density, cfg.Out = density, t.TempDir()
			var err error
			if cfg.Settings, err = cfg.Settings.For("exdyna"); err != nil {
				t.Fatal(err)
			}
			if err := train(context.Background(), cfg); err != nil {
				t.Fatal(err)
			}
			rows, err := plots.ReadMetrics(filepath.Join(cfg.Out, "metrics.csv"))
			if err != nil {
				t.Fatal(err)
			}
			checked := 0
			for _, r := range rows {
				if r.Kind != "train" {
					continue
				}
				checked++
				if math.IsNaN(r.Density) || math.Abs(r.Density/density-1) > 0.1 {
					t.Errorf("step %d sent density %.4f, target %g", r.Step, r.Density, density)
				}
			}
			if checked != steps {
				t.Errorf("%d training steps in metrics.csv, want %d", checked, steps)
			}
		})
	}
}

// TestFidelitySwitchesKeepRanksIdentical: the authors' behaviours offered as options
// (error feedback off, SSFusion's rank and cost rules) leave all ranks with bit-identical
// parameters after every step, as the defaults do.
func TestFidelitySwitchesKeepRanksIdentical(t *testing.T) {
	for _, tc := range []struct {
		name, pipeline, rule string
		feedback             bool
	}{
		{"pertensor without error feedback", "pertensor", "size", false},
		{"multitensor without error feedback", "multitensor", "size", false},
		{"safusion without error feedback", "safusion", "size", false},
		{"exdyna without error feedback", "exdyna", "size", false},
		{"ssfusion without error feedback", "ssfusion", "size", false},
		{"ssfusion by rank", "ssfusion", "rank", true},
		{"ssfusion by cost", "ssfusion", "cost", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := trainer.Defaults()
			cfg.Model, cfg.Dataset, cfg.MaxSteps, cfg.EvalSamples = "mlp", "mnist", 6, 100
			cfg.Workers, cfg.BatchSize, cfg.Backend, cfg.CheckEvery = 3, 8, "inproc", 1
			cfg.Pipeline, cfg.Density, cfg.LR, cfg.Out = tc.pipeline, 0.01, 0.1, t.TempDir()
			cfg.SelectRule, cfg.ErrorFeedback = tc.rule, tc.feedback
			cfg.CostAlpha, cfg.CostBeta = 5.2e-4, 8.6e-10
			var err error
			if cfg.Settings, err = cfg.Settings.For(tc.pipeline); err != nil { // the keys it reads
				t.Fatal(err)
			}
			if err := train(context.Background(), cfg); err != nil {
				t.Fatal(err)
			}
			s := readSummary(t, cfg.Out)
			if s.Consistency.ParamChecksumEqual == nil || !*s.Consistency.ParamChecksumEqual {
				t.Fatalf("ranks diverged: %+v", s.Consistency)
			}
		})
	}
}

func TestMomentumCorrection(t *testing.T) {
	cfg := trainer.Defaults()
	cfg.Model, cfg.Dataset, cfg.MaxSteps, cfg.EvalSamples = "mlp", "mnist", 5, 100
	cfg.Workers, cfg.BatchSize, cfg.Backend, cfg.Pipeline = 2, 8, "inproc", "pertensor"
	cfg.MomentumCorrection, cfg.Out = true, t.TempDir()
	if err := train(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Pipeline = "dense"
	if err := train(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "momentum-correction") {
		t.Errorf("dense with momentum correction: error %v, want one naming momentum-correction", err)
	}
}

// Two launchers, as on two machines (torchrun's --nnodes 2 and --node-rank), start 2
// workers each on loopback; together they train one 4-rank job whose ranks agree.
func TestTwoNodesFormOneJob(t *testing.T) {
	// The port must reach both launchers on their command lines. The test holds it from
	// its choice on and hands the listener to node 0's launcher, which hands it to rank 0,
	// so that no other process can take the port before the rendezvous.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	t.Setenv(tcp.EnvJobToken, tcp.NewJobToken())
	dir := t.TempDir()
	outs := []string{filepath.Join(dir, "node0"), filepath.Join(dir, "node1")}
	var cmds []*exec.Cmd
	var logs []*output
	for node := range 2 {
		cmd, out := unstarted(dir, "train", "--model", "mlp", "--dataset", "synthetic", "--workers", "2", "--max-steps", "6",
			"--eval-samples", "64", "--check-every", "3", "--nnodes", "2", "--node-rank", strconv.Itoa(node),
			"--master-addr", "127.0.0.1", "--master-port", port, "--out", outs[node])
		var handed *os.File
		if node == 0 {
			if handed, err = tcp.InheritListener(cmd, ln); err != nil {
				t.Fatal(err)
			}
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if handed != nil {
			handed.Close()
		}
		cmds, logs = append(cmds, cmd), append(logs, out)
	}
	for node, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("node %d: %v\n%s", node, err, logs[node])
		}
	}
	s := readSummary(t, outs[0])
	if s.Workers != 4 || s.Consistency.ParamChecksumEqual == nil || !*s.Consistency.ParamChecksumEqual {
		t.Errorf("rank 0's summary: %d workers, ranks agree %v; want 4 and true", s.Workers, s.Consistency.ParamChecksumEqual)
	}
	if !strings.Contains(logs[0].String(), "[rank 0]") {
		t.Errorf("node 0 printed nothing of rank 0:\n%s", logs[0])
	}
	// A second node without the master's address is refused before anything starts.
	cmd, out := command(t, dir, "train", "--model", "mlp", "--dataset", "synthetic", "--workers", "2", "--nnodes", "2", "--node-rank", "1")
	if err := cmd.Wait(); exitCodeOf(t, err) != 2 || !strings.Contains(out.String(), "--master-addr") {
		t.Errorf("--nnodes 2 without --master-addr: %v\n%s", err, out)
	}
}

// On a terminal, the training's progress bar reaches it from rank 0 of a multi-worker job
// and from each cell of an experiment, though neither writes to the terminal directly.
func TestProgressBarReachesTheTerminal(t *testing.T) {
	dir := t.TempDir()
	exp := filepath.Join(dir, "exp.yaml")
	os.WriteFile(exp, []byte("name: bar\nbase: {model: mlp, dataset: synthetic, max-steps: 30, eval-samples: 64}\nmatrix:\n  workers: [2]\n"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"train with workers", []string{"train", "--model", "mlp", "--dataset", "synthetic", "--workers", "2", "--max-steps", "30", "--eval-samples", "64", "--out", filepath.Join(dir, "train")}},
		{"run", []string{"run", exp, "--results", filepath.Join(dir, "results")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], tc.args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), mainEnv+"=1")
			tty, err := pty.Start(cmd)
			if err != nil {
				t.Skipf("no pseudo-terminal here: %v", err)
			}
			defer tty.Close()
			var screen bytes.Buffer
			io.Copy(&screen, tty) // ends with an error once the command has exited
			if err := cmd.Wait(); err != nil {
				t.Fatalf("%v\n%s", err, screen.String())
			}
			// The bar's count of steps, as the trainer's bar draws it.
			if !regexp.MustCompile(`\(\d+/30, `).MatchString(screen.String()) {
				t.Errorf("no progress bar on the terminal:\n%q", screen.String())
			}
		})
	}
}

// TestStartCPUProfile: the variable, when set, makes a worker write its own profile under
// the prefix; unset, nothing is written; a prefix in a missing folder fails before training.
func TestStartCPUProfile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, prefix string
		rank         int
		want         string // the file that must hold a profile, "" for none
		fails        bool
	}{
		{name: "unset", prefix: "", rank: 0},
		{name: "rank 3", prefix: filepath.Join(dir, "cpu"), rank: 3, want: filepath.Join(dir, "cpu.rank3")},
		{name: "missing folder", prefix: filepath.Join(dir, "missing", "cpu"), rank: 0, fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(cpuProfileEnv, tc.prefix)
			stop, err := startCPUProfile(tc.rank)
			if tc.fails {
				if err == nil {
					stop()
					t.Fatal("started a profile into a missing folder")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			stop()
			if tc.want == "" {
				if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) > 0 {
					t.Fatalf("wrote %v with the variable unset", files)
				}
				return
			}
			if info, err := os.Stat(tc.want); err != nil || info.Size() == 0 {
				t.Fatalf("profile %s: %v (size %v)", tc.want, err, info)
			}
		})
	}
}

// The pipelines that exchange all-to-all (Ok-Topk) or gather into a kept buffer receive
// into it over shared memory, which the in-process backend never does: the same job must
// end with the same parameters either way.
func TestSharedMemoryRanksMatchInProcessRanks(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"oktopk", "multitensor"} {
		sums := map[string]string{}
		for _, backend := range []string{"inproc", "tcp"} {
			out := filepath.Join(dir, name+"-"+backend)
			cmd, log := command(t, dir, "train", "--pipeline", name, "--model", "mlp", "--dataset", "synthetic", "--workers", "3",
				"--max-steps", "8", "--density", "0.01", "--eval-samples", "64", "--check-every", "4", "--backend", backend, "--out", out)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("%s over %s: %v\n%s", name, backend, err, log)
			}
			if backend == "tcp" && !strings.Contains(log.String(), "shared memory") {
				t.Errorf("%s over tcp: the log does not say the ranks went to shared memory:\n%s", name, log)
			}
			sums[backend] = readSummary(t, out).Consistency.ParamChecksum
		}
		if sums["inproc"] != sums["tcp"] {
			t.Errorf("%s: parameters %s in one process, %s between processes", name, sums["inproc"], sums["tcp"])
		}
	}
}
