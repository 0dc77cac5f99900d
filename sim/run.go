package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/profile"
)

// Factory builds the pipeline under simulation on a communicator.
type Factory = pipeline.Factory

// Job is one simulation: one pipeline, one scale, one network.
type Job struct {
	Profile   *profile.Profile
	Workers   int
	Network   CostModel
	Selection SelectionModel
	Pipeline  Factory
	// Steps is how many steps run; the figures average the steps after Warmup, which
	// leaves out plan learning, SAFusion's timed warm-up and the settling of thresholds.
	Steps, Warmup int
	// Real makes every rank a goroutine that moves real data, Workers copies of the
	// model; otherwise one rank stands for all.
	Real bool
	// Gradients are rank 0's gradients (see NewGradients); nil makes them. Real jobs give
	// the other ranks gradients of their own.
	Gradients *Gradients
	Seed      uint64
	// Density scales the gradients the job makes (see Gradients); use the pipeline's.
	Density float64
}

// DefaultSteps and DefaultWarmup are Job.Steps and Job.Warmup when left at zero.
const (
	DefaultSteps  = 10
	DefaultWarmup = 6
)

// Result is what a job predicts, per step, averaged over the steps after the warm-up.
type Result struct {
	Workers     int     `json:"workers"`
	IterationMS float64 `json:"iteration_ms"`  // a step, from its start to the end of the optimizer update
	SamplesPerS float64 `json:"samples_per_s"` // over all workers
	ComputeMS   float64 `json:"compute_ms"`    // forward, backward and update, from the profile
	// SelectionMS is the selection that delays the step on the goroutine that runs
	// backward (selection done in Push); SelectionTotalMS counts selection wherever it ran.
	SelectionMS      float64 `json:"selection_ms"`
	SelectionTotalMS float64 `json:"selection_total_ms"`
	// ExposedCommMS is the rest of the step: waiting for collectives that backward did not
	// hide, and for selection that ran off the backward goroutine yet delays the step
	// (ExDyna's, in Wait; the tail of SSFusion's offloaded selection).
	ExposedCommMS  float64   `json:"exposed_comm_ms"`
	CommMS         float64   `json:"comm_ms"`        // time with a collective in flight, the union of their intervals
	BytesPerStep   float64   `json:"bytes_per_step"` // bytes one rank sends per step
	Density        float64   `json:"density"`        // elements sent over elements; 0 for a dense pipeline
	TensorsMissing float64   `json:"tensors_missing"`
	StepMS         []float64 `json:"step_ms"` // every step's iteration time, warm-up included
}

// Simulate runs job and returns its prediction. Cancelling ctx stops it at the next
// simulated step of every rank, with ctx's error.
func Simulate(ctx context.Context, job Job) (Result, error) {
	res, _, err := simulate(ctx, job, false)
	return res, err
}

// simulate runs job; with keep it also returns every rank's aggregated gradients of the
// last step, by rank and tensor id (forward order), which tests compare with a run of the
// same pipeline on another backend.
func simulate(ctx context.Context, job Job, keep bool) (Result, [][][]float32, error) {
	if err := job.check(); err != nil {
		return Result{}, nil, err
	}
	steps, warmup := job.steps()
	clock := NewVirtualClock(job.Selection.Time)
	var comms []dist.Communicator
	if job.Real {
		comms = NewSim(job.Workers, job.Network, clock)
	} else {
		comms = []dist.Communicator{NewSimRank(job.Workers, job.Network, clock)}
	}
	grads := make([]*Gradients, len(comms))
	grads[0] = job.Gradients
	if grads[0] == nil {
		grads[0] = NewGradients(job.Profile, job.Seed, job.Density)
	}
	for r := 1; r < len(comms); r++ {
		grads[r] = NewGradients(job.Profile, rankSeed(job.Seed, r), job.Density)
	}
	// Ranks that move real data may be waiting for each other in a collective when ctx
	// ends: closing the communicators releases them.
	stop := context.AfterFunc(ctx, func() {
		for _, c := range comms {
			c.Close()
		}
	})
	defer stop()
	records := make([][]stepRecord, len(comms))
	kept := make([][][]float32, len(comms))
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, comm := range comms {
		wg.Go(func() {
			defer comm.Close()
			rk := &rankRun{job: &job, clock: clock, comm: comm, grads: grads[r]}
			records[r], errs[r] = rk.run(ctx, steps)
			if keep && errs[r] == nil {
				kept[r] = rk.aggregated()
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Result{}, nil, err
	}
	if err := errors.Join(errs...); err != nil {
		return Result{}, nil, err
	}
	res := summarize(&job, records[0][warmup:])
	for _, r := range records[0] {
		res.StepMS = append(res.StepMS, ms(r.iteration))
	}
	return res, kept, nil
}

// rankSeed is the seed of rank r's gradients in a real job.
func rankSeed(seed uint64, r int) uint64 { return seed + uint64(r)*0x9e3779b97f4a7c15 }

func (job *Job) check() error {
	switch {
	case job.Profile == nil:
		return errors.New("sim: the job has no profile")
	case job.Workers < 1:
		return fmt.Errorf("sim: workers must be at least 1, got %d", job.Workers)
	case job.Network == nil:
		return errors.New("sim: the job has no network model")
	case job.Pipeline == nil:
		return errors.New("sim: the job has no pipeline")
	}
	if steps, warmup := job.steps(); warmup >= steps {
		return fmt.Errorf("sim: %d steps leave nothing after %d warm-up steps", steps, warmup)
	}
	if c, ok := job.Network.(interface{ Check() error }); ok {
		if err := c.Check(); err != nil {
			return fmt.Errorf("sim: %w", err)
		}
	}
	return job.Profile.Check()
}

func (job *Job) steps() (steps, warmup int) {
	steps, warmup = job.Steps, job.Warmup
	if steps <= 0 {
		steps = DefaultSteps
	}
	if warmup <= 0 {
		warmup = min(DefaultWarmup, steps-1)
	}
	return steps, warmup
}

// stepRecord is what one rank saw in one step.
type stepRecord struct {
	iteration time.Duration
	blocking  time.Duration // backward's delay beyond the profile: selection in Push
	metrics   pipeline.StepMetrics
}

// rankRun is one rank of a job: its pipeline and the gradients it pushes.
type rankRun struct {
	job     *Job
	clock   *VirtualClock
	comm    dist.Communicator
	grads   *Gradients
	tensors []pipeline.Tensor
}

// run builds the pipeline and runs steps steps on the rank's goroutine, until ctx ends.
func (rk *rankRun) run(ctx context.Context, steps int) ([]stepRecord, error) {
	prof := rk.job.Profile
	n := len(prof.Tensors)
	rk.tensors = make([]pipeline.Tensor, n)
	for i, t := range prof.Tensors {
		id := n - 1 - i // the profile lists tensors in backprop order, ids follow forward order
		rk.tensors[id] = pipeline.Tensor{ID: id, Name: t.Name, Dims: t.Dims, Shape: t.Shape, Grad: make([]float32, t.Numel)}
	}
	pipe, err := rk.job.Pipeline(rk.comm, rk.tensors)
	if err != nil {
		return nil, fmt.Errorf("sim: building the pipeline: %w", err)
	}
	defer pipe.Close()
	if x, ok := pipe.(Exchanger); ok && !rk.job.Real {
		if lone, ok := rk.comm.(*simComm); ok {
			lone.setExchange(x.ExchangeMessage)
		}
	}
	if m, ok := pipe.(Mirrorer); ok && !rk.job.Real {
		if lone, ok := rk.comm.(*simComm); ok {
			lone.setMirror(m.MirrorMessage)
		}
	}
	records := make([]stepRecord, 0, steps)
	for s := range steps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec, err := rk.step(pipe, s)
		if err != nil {
			return nil, fmt.Errorf("sim: rank %d, step %d: %w", rk.comm.Rank(), s, err)
		}
		records = append(records, rec)
	}
	return records, nil
}

// step replays one training step's compute and pushes the gradients as they become ready.
func (rk *rankRun) step(pipe pipeline.Pipeline, step int) (stepRecord, error) {
	prof := rk.job.Profile
	n := len(prof.Tensors)
	scale := rk.jitter(step)
	start := rk.clock.Elapsed()
	rk.clock.Advance(profile.Duration(scale * prof.ForwardMS))
	for i, t := range prof.Tensors {
		rk.clock.Advance(profile.Duration(scale * t.BackwardMS))
		id := n - 1 - i
		grad := rk.tensors[id].Grad
		rk.grads.Fill(grad, i, step)
		if err := pipe.Push(id, grad); err != nil {
			return stepRecord{}, err
		}
	}
	rk.clock.Advance(profile.Duration(scale * prof.TailMS))
	backward := rk.clock.Elapsed() - start
	if err := pipe.Wait(); err != nil {
		return stepRecord{}, err
	}
	rk.clock.Advance(profile.Duration(prof.UpdateMS))
	pure := profile.Duration(scale * (prof.ForwardMS + prof.BackwardMS()))
	return stepRecord{
		iteration: rk.clock.Elapsed() - start,
		blocking:  max(0, backward-pure),
		metrics:   pipe.Metrics(),
	}, nil
}

// jitter is the factor of this rank's compute in step, from the profile's ComputeJitter: a
// measured step drawn for the simulated step, the same for every rank, and the rank's
// column of it (ranks beyond the measured ones reuse columns), so that ranks straggle as
// the measured ones did. 1 without jitter, and for a lone rank standing for all, which has
// no one to straggle behind.
func (rk *rankRun) jitter(step int) float64 {
	rows := rk.job.Profile.ComputeJitter
	if len(rows) == 0 || !rk.job.Real {
		return 1
	}
	row := rows[mix(rk.job.Seed^uint64(step))%uint64(len(rows))]
	return row[rk.comm.Rank()%len(row)]
}

// aggregated copies the rank's gradients, which hold the last step's aggregate.
func (rk *rankRun) aggregated() [][]float32 {
	out := make([][]float32, len(rk.tensors))
	for id, t := range rk.tensors {
		out[id] = slices.Clone(t.Grad)
	}
	return out
}

// summarize averages the records of the measured steps.
func summarize(job *Job, recs []stepRecord) Result {
	res := Result{Workers: job.Workers, ComputeMS: job.Profile.IterationMS()}
	for _, r := range recs {
		res.IterationMS += ms(r.iteration)
		res.SelectionMS += ms(r.blocking)
		res.SelectionTotalMS += ms(r.metrics.Sparsify)
		res.CommMS += ms(r.metrics.Comm)
		res.BytesPerStep += float64(r.metrics.BytesSent)
		res.Density += r.metrics.DensityAchieved
		res.TensorsMissing += float64(r.metrics.TensorsMissing)
	}
	k := float64(len(recs))
	for _, v := range []*float64{&res.IterationMS, &res.SelectionMS, &res.SelectionTotalMS, &res.CommMS, &res.BytesPerStep, &res.Density, &res.TensorsMissing} {
		*v /= k
	}
	res.ExposedCommMS = math.Max(0, res.IterationMS-res.ComputeMS-res.SelectionMS)
	if res.IterationMS > 0 {
		res.SamplesPerS = float64(job.Workers*job.Profile.BatchSize) / (res.IterationMS / 1000)
	}
	return res
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
