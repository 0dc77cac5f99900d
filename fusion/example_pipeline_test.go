package fusion_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ssfusion/ssfusion/baselines"
	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/fusion"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipeline/pipelinetest"
	"github.com/ssfusion/ssfusion/pipelines"
	"github.com/ssfusion/ssfusion/trainer"
)

// A worked example of a pipeline built on the fusion engine (docs/pipelines.md says how a
// pipeline joins the registry): random-k sparsification with
// error feedback, each tensor selected on its own and sent in a message of its own. The
// engine learns the backprop order, orders the collectives and measures the step; the
// compressor keeps the memory and times and counts the selections; the stage only says
// what goes into which message.

func init() {
	pipelines.Register(pipelines.Spec{
		Name:        "randomk-per-tensor",
		Description: "random-k of every tensor with error feedback, each sent in a message of its own",
		Reads:       []string{"density"},
		Tolerance:   0.1,
		New: func(b pipelines.Build) (pipeline.Pipeline, error) {
			return newRandomKPerTensor(b.Comm, b.Tensors, b.Settings.Density, b.Seed)
		},
	})
}

// newRandomKPerTensor returns the pipeline.
func newRandomKPerTensor(comm dist.Communicator, tensors []pipeline.Tensor, density float64, seed uint64) (pipeline.Pipeline, error) {
	cfg := compress.Config{Density: density, Selector: "randomk", Seed: seed}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	// A fusion threshold of one byte gives every tensor a buffer, and a message, of its own.
	return fusion.New(comm, tensors, 1, &randomKPerTensor{comm: comm, tensors: tensors, cfg: cfg}, true)
}

type randomKPerTensor struct {
	comm    dist.Communicator
	tensors []pipeline.Tensor
	cfg     compress.Config
	e       fusion.Engine
	c       *compress.Compressor
	bufs    []*fusion.SparseBuffer // by bucket, each of one tensor
}

func (p *randomKPerTensor) Plan(e fusion.Engine, buckets []fusion.Bucket) ([]int, bool, error) {
	sel, err := compress.NewSelector(p.cfg.Selector, p.cfg.Seed+uint64(p.comm.Rank()))
	if err != nil {
		return nil, false, err
	}
	if p.c, err = fusion.NewCompressor(e, p.cfg, pipeline.Sizes(p.tensors), sel); err != nil {
		return nil, false, err
	}
	p.e = e
	parts := make([]int, len(buckets)) // each message waits for its one tensor
	for b, bucket := range buckets {
		p.bufs = append(p.bufs, fusion.NewSparseBuffer(p.tensors, bucket.Tensors))
		parts[b] = 1
	}
	return parts, false, nil
}

func (p *randomKPerTensor) Process(id int, s fusion.Slot, grad []float32) error {
	if err := p.c.Compress(id, grad, &p.bufs[s.Bucket].Parts[0]); err != nil {
		return err
	}
	p.e.Done(s.Bucket)
	return nil
}

func (p *randomKPerTensor) Issue(b int) fusion.Completion { return p.bufs[b].AllGather(p.comm) }

func (p *randomKPerTensor) Finish() error {
	for _, buf := range p.bufs {
		if err := buf.Average(); err != nil {
			return err
		}
	}
	return nil
}

// Memory gives checkpoints the error-feedback memory, nil before the plan.
func (p *randomKPerTensor) Memory() *compress.Memory { return p.c.Memory() }

func (p *randomKPerTensor) Close() error { return nil }

// TestExamplePipelineTrains trains a model data-parallel with the example pipeline, by the
// name it registered, as the train command does.
func TestExamplePipelineTrains(t *testing.T) {
	cfg := trainer.Defaults()
	// Plain SGD: random-k's picks are noisy, and momentum on top of error feedback makes
	// them diverge (DGC's momentum correction is the remedy, see compress.Memory).
	cfg.Model, cfg.Dataset, cfg.Workers, cfg.MaxSteps = "mlp", "synthetic", 2, 40
	cfg.Pipeline, cfg.Density, cfg.LR, cfg.Momentum, cfg.EvalSamples, cfg.LogEvery = "randomk-per-tensor", 0.25, 0.1, 0, 256, 0
	cfg.Out = t.TempDir()
	comms := inproc.New(cfg.Workers)
	sums := make([]*trainer.Summary, len(comms))
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for rank, comm := range comms {
		wg.Go(func() {
			defer comm.Close()
			sums[rank], errs[rank] = trainer.Run(context.Background(), cfg, trainer.Options{Comm: comm})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	s := sums[0]
	if !s.Complete || s.Steps != cfg.MaxSteps || s.Consistency.ParamChecksumEqual == nil || !*s.Consistency.ParamChecksumEqual {
		t.Fatalf("run incomplete or ranks disagree: complete %v, %d steps, checksums equal %v", s.Complete, s.Steps, s.Consistency.ParamChecksumEqual)
	}
	if *s.FinalLoss >= *s.InitialLoss {
		t.Errorf("loss did not fall: %g -> %g", *s.InitialLoss, *s.FinalLoss)
	}
	sp := s.Sparsity
	if sp.DensityAchieved == nil || *sp.DensityAchieved < 0.9*cfg.Density || *sp.DensityAchieved > 1.1*cfg.Density || *sp.TensorsMissingPerStep != 0 {
		t.Errorf("density %v, missing %v: want about %g and none missing", *sp.DensityAchieved, *sp.TensorsMissingPerStep, cfg.Density)
	}
}

// gatherCounter counts the allgathers issued through it.
type gatherCounter struct {
	dist.Communicator
	calls *atomic.Int64
}

func (c gatherCounter) AllGatherVAsync(send []byte) dist.GatherHandle {
	c.calls.Add(1)
	return c.Communicator.AllGatherVAsync(send)
}

// TestExamplePipelineIsPerTensorRandomK: selecting each tensor on its own with the same
// seeds, the example aggregates exactly what per-tensor sparsification with random-k does;
// only the messages differ, one per tensor instead of one per fusion buffer.
func TestExamplePipelineIsPerTensorRandomK(t *testing.T) {
	sizes := []int{300, 7, 1000, 50}
	const world, steps, density, seed = 2, 4, 0.05, 9
	grads := pipelinetest.Normal(sizes, nil)
	var calls atomic.Int64
	got, err := pipelinetest.Run(world, sizes, nil, steps, grads, func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		return newRandomKPerTensor(gatherCounter{comm, &calls}, tensors, density, seed)
	})
	if err != nil {
		t.Fatal(err)
	}
	want, err := pipelinetest.Run(world, sizes, nil, steps, grads, func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		return baselines.NewPerTensor(comm, tensors, 1<<20, compress.Config{Density: density, Selector: "randomk", Seed: seed})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := pipelinetest.CheckSame(got, want); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != world*steps*int64(len(sizes)) {
		t.Errorf("%d allgathers on %d ranks in %d steps, want one per tensor: %d", n, world, steps, world*steps*len(sizes))
	}
}

// TestExamplePipelineConforms runs the conformance suite on the example pipeline.
func TestExamplePipelineConforms(t *testing.T) {
	spec, err := pipelines.Lookup("randomk-per-tensor")
	if err != nil {
		t.Fatal(err)
	}
	pipelinetest.Conformance(t, spec)
}
