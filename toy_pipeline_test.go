package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipeline/pipelinetest"
	"github.com/ssfusion/ssfusion/pipelines"
	"github.com/ssfusion/ssfusion/trainer"
)

// toy is a pipeline that this test file alone adds: it averages every tensor with its own
// allreduce when Wait is called. Registering it is all it takes to reach train, simulate,
// the pipelines listing and the conformance suite.
type toy struct {
	comm    dist.Communicator
	tensors []pipeline.Tensor
	pushes  *pipeline.Pushes
	sent    int64
}

func init() {
	pipelines.Register(pipelines.Spec{
		Name:        "toy",
		Description: "a test's own pipeline: one allreduce per tensor at the end of backward",
		New: func(b pipelines.Build) (pipeline.Pipeline, error) {
			return &toy{comm: b.Comm, tensors: b.Tensors, pushes: pipeline.NewPushes(b.Tensors)}, nil
		},
	})
}

func (p *toy) Push(id int, grad []float32) error { return p.pushes.Push(id, grad) }

func (p *toy) Wait() error {
	defer p.pushes.Reset()
	if err := p.pushes.Complete(); err != nil {
		return err
	}
	before := p.comm.Stats()
	for _, t := range p.tensors {
		if err := p.comm.AllReduce(t.Grad, dist.Average); err != nil {
			return err
		}
	}
	p.sent = p.comm.Stats().Sub(before).BytesSent
	return nil
}

func (p *toy) Metrics() pipeline.StepMetrics { return pipeline.StepMetrics{BytesSent: p.sent} }
func (p *toy) Close() error                  { return nil }

// TestToyPipelineEverywhere: a pipeline registered in a test file, with no other edit,
// is listed, trains, simulates and passes the conformance suite.
func TestToyPipelineEverywhere(t *testing.T) {
	var listing bytes.Buffer
	if err := listPipelines(&listing); err != nil || !strings.Contains(listing.String(), "toy ") {
		t.Errorf("pipelines listing (%v) lacks toy:\n%s", err, listing.String())
	}
	cfg := trainer.Defaults()
	cfg.Model, cfg.Dataset, cfg.MaxSteps, cfg.EvalSamples, cfg.LogEvery = "mlp", "synthetic", 4, 64, 0
	cfg.Pipeline, cfg.Workers, cfg.Backend, cfg.CheckEvery, cfg.Out = "toy", 2, "inproc", 1, t.TempDir()
	if err := train(context.Background(), cfg); err != nil {
		t.Fatalf("train --pipeline toy: %v", err)
	}
	if s := readSummary(t, cfg.Out); s.Consistency.ParamChecksumEqual == nil || !*s.Consistency.ParamChecksumEqual {
		t.Errorf("train --pipeline toy: ranks diverged: %+v", s.Consistency)
	}
	out := t.TempDir()
	if err := runSimulateArgs(t, "--validate=false", "--profile", "resnet50", "--pipelines", "toy,dense",
		"--workers", "8", "--bandwidth", "10Gbit", "--steps", "3", "--warmup", "1", "--out", out); err != nil {
		t.Fatalf("simulate --pipelines toy: %v", err)
	}
	if rep := readSimulation(t, out); len(rep.Points) != 2 || rep.Points[0].Pipeline != "toy" {
		t.Errorf("simulate: points %+v, want toy's and dense's", rep.Points)
	}
	spec, err := pipelines.Lookup("toy")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("conformance", func(t *testing.T) { pipelinetest.Conformance(t, spec) })
}
