// Package trainer owns the training loop: it builds the model and data of a Config, runs
// forward and backward, hands every gradient to a gradient pipeline as backprop produces it,
// applies SGD with the configured learning-rate schedule, evaluates on the test split,
// writes summary.json and metrics.csv, keeps checkpoints to resume from, and on request
// records the compute profile the scale simulator replays (Config.ProfileOut).
//
// The trainer knows gradient pipelines only through pipeline.Pipeline and the registry of
// package pipelines, which builds the pipeline a configuration names; a program links in
// the pipelines it offers by importing the packages that register them.
package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/internal/atomicfile"
	"github.com/ssfusion/ssfusion/internal/provenance"
	"github.com/ssfusion/ssfusion/internal/tensorboard"
	"github.com/ssfusion/ssfusion/nets"
	"github.com/ssfusion/ssfusion/pipeline"
)

// Options are the parts of a run chosen by the caller rather than by the configuration.
type Options struct {
	// NewPipeline, when set, builds the gradient pipeline instead of the registry (see
	// NewPipeline), as tests that watch a pipeline do.
	NewPipeline func(cfg *Config, tensors []pipeline.Tensor) (pipeline.Pipeline, error)
	// Logf prints a log line; nil discards logs.
	Logf func(format string, args ...any)
	// Progress, when set, receives a progress bar per epoch instead of periodic log lines.
	Progress io.Writer
	// Comm connects the ranks of a data-parallel job; nil means a single process. The
	// trainer broadcasts rank 0's initial parameters, averages evaluations, compares parameter
	// checksums every Config.CheckEvery steps, and lets only rank 0 write outputs.
	Comm dist.Communicator
	// AfterStep, when set, is called after every training step with the number of steps
	// done, e.g. to stop a run from outside at a chosen point.
	AfterStep func(steps int)
}

// CheckOut creates dir and checks that files can be written there, so that a run whose
// results could not be saved fails before it trains rather than after.
func CheckOut(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("output folder: %w", err)
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("output folder %s is not writable: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// removeStale removes the temporary files that a run killed while writing its results or
// a checkpoint left in out.
func removeStale(out string, logf func(string, ...any)) error {
	for _, dir := range []string{out, filepath.Join(out, checkpointDir)} {
		removed, err := atomicfile.RemoveStale(dir)
		if err != nil {
			return err
		}
		for _, f := range removed {
			logf("removed %s, which a run killed while it wrote left behind", f)
		}
	}
	return nil
}

// DefaultOut is where a run writes when --out is not given: results/train/<run>/.
func DefaultOut(cfg *Config) string {
	name := fmt.Sprintf("%s-%s-%s-w%d-s%d", cfg.Model, cfg.Dataset, cfg.Pipeline, cfg.Workers, cfg.Seed)
	return filepath.Join("results", "train", name)
}

// CheckJob checks, before a launcher starts any process of a job of world ranks in all
// (on every node), what would otherwise fail in every rank once all have started: that
// the results can be written, and that every rank's shard of the data fills at least one
// batch.
func CheckJob(cfg Config, world int) error {
	cfg.Resolve()
	if cfg.Out == "" {
		cfg.Out = DefaultOut(&cfg)
	}
	if err := CheckOut(cfg.Out); err != nil {
		return err
	}
	cfg.Workers = world
	return CheckData(&cfg)
}

// Run trains as cfg says and returns the summary it wrote. When training fails or ctx is
// cancelled it still writes what was measured (marked incomplete) and returns the error.
func Run(ctx context.Context, cfg Config, opts Options) (*Summary, error) {
	cfg.Resolve()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	if cfg.Out == "" {
		cfg.Out = DefaultOut(&cfg)
	}
	if opts.Comm == nil || opts.Comm.Rank() == 0 {
		if err := CheckOut(cfg.Out); err != nil {
			return nil, err
		}
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Comm == nil || opts.Comm.Rank() == 0 {
		// Before the first collective, so before any other rank can write here.
		if err := removeStale(cfg.Out, opts.Logf); err != nil {
			return nil, err
		}
	}
	r, err := newRun(&cfg, opts)
	if err != nil {
		return nil, err
	}
	defer r.close()
	trainErr := r.train(ctx)
	if trainErr == nil && r.prof != nil {
		trainErr = r.gatherJitter()
	}
	s := r.summarize(trainErr)
	if r.rank == 0 {
		if err := writeOutputs(cfg.Out, s, r.rows); err != nil {
			return s, errors.Join(trainErr, err)
		}
		opts.Logf("wrote %s", filepath.Join(cfg.Out, "summary.json"))
		if trainErr == nil {
			if err := r.writeWeights(weightsFile, nil); err != nil {
				return s, err
			}
		}
		switch {
		case r.prof == nil:
		case trainErr != nil:
			opts.Logf("not writing %s: a profile is written only when training succeeds", cfg.ProfileOut)
		default:
			if err := r.writeProfile(); err != nil {
				return s, err
			}
		}
	}
	if trainErr != nil || cfg.CheckpointEvery == 0 {
		return s, trainErr
	}
	// The outputs now hold the whole run: its checkpoint could only resume a finished run.
	// Every rank waits for rank 0's outputs before removing its part.
	if err := r.barrier("rank 0 wrote the results"); err != nil {
		return s, err
	}
	return s, r.removeCheckpoints(0)
}

// run is the state of one training run.
type run struct {
	cfg    *Config
	origin provenance.Info     // where the results come from, for summary.json
	live   *liveMetrics        // rank 0's metrics.csv as the run goes on
	board  *tensorboard.Writer // rank 0's TensorBoard events, with --tensorboard
	opts   Options
	data   *data
	model  nets.Model
	params []nets.Param
	comm   dist.Communicator // nil in a single process
	rank   int
	world  int
	pipe   pipeline.Pipeline
	prof   *profiler   // nil without --profile-out
	tl     *timeline   // nil without --timeline-steps, and on ranks but 0
	jitter [][]float64 // every rank's step compute over the mean, gathered for the profile
	opt    *SGD
	sched  Schedule

	batch   nets.Batch
	hookErr error
	stats   stepStats
	checks  consistency
	rows    []Row
	start   time.Time
	step    int
	lastRes *Eval
	changes []ConfigChange // resumptions under changed settings, see compatible
}

func newRun(cfg *Config, opts Options) (*run, error) {
	rank, world := 0, 1
	if opts.Comm != nil {
		rank, world = opts.Comm.Rank(), opts.Comm.Size()
	}
	if err := agreeOnJob(opts.Comm, *cfg); err != nil {
		return nil, err
	}
	d, err := loadData(cfg, rank, world)
	if err != nil {
		return nil, err
	}
	spec := d.spec
	spec.Arch, spec.BatchSize, spec.Seed, spec.WidthMult = cfg.Model, cfg.BatchSize, cfg.Seed, cfg.Width
	spec.SeqLen, spec.HSize, spec.Layers, spec.Dropout = cfg.SeqLen, cfg.Hidden, cfg.Layers, cfg.Dropout
	if len(cfg.MLPHidden) > 0 {
		// An empty list from a flag or a file means the default layers, which only a nil
		// Hidden gives: an empty one would build the MLP with none.
		spec.Hidden = cfg.MLPHidden
	}
	model, err := nets.New(spec)
	if err != nil {
		return nil, fmt.Errorf("building %s: %w", cfg.Model, err)
	}
	r := &run{cfg: cfg, opts: opts, data: d, model: model, params: model.Params(), comm: opts.Comm, rank: rank, world: world}
	if rank == 0 { // the rank that writes summary.json
		r.origin = provenance.Collect(nets.GEMMKernel())
	}
	tensors := make([]pipeline.Tensor, len(r.params))
	for i, p := range r.params {
		tensors[i] = pipeline.Tensor{ID: i, Name: p.Name, Dims: len(p.Shape), Shape: p.Shape, Grad: p.Grad}
	}
	if cfg.TimelineSteps > 0 && rank == 0 {
		r.tl = newTimeline(max(0, r.totalSteps()-cfg.TimelineSteps))
	}
	build := opts.NewPipeline
	if build == nil {
		comm := opts.Comm
		if r.tl != nil && comm != nil {
			comm = newTimedComm(comm, r.tl)
		}
		build = func(cfg *Config, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
			return NewPipeline(cfg, comm, tensors)
		}
	}
	if r.pipe, err = build(cfg, tensors); err != nil {
		model.Close()
		return nil, fmt.Errorf("building pipeline %s: %w", cfg.Pipeline, err)
	}
	if err := r.setHook(); err != nil {
		r.close()
		return nil, err
	}
	momentum := cfg.Momentum
	if cfg.MomentumCorrection {
		momentum = 0 // the pipeline's memory applies it before selection
	}
	r.opt = NewSGD(r.params, momentum, cfg.Nesterov, cfg.WeightDecay)
	perEpoch := d.train.StepsPerEpoch()
	r.sched = Schedule{
		Base: cfg.LR, Kind: cfg.Schedule, Milestones: cfg.Milestones, Gamma: cfg.Gamma,
		WarmupSteps: int(math.Round(cfg.WarmupEpochs * float64(perEpoch))), StepsPerEpoch: perEpoch,
		TotalSteps: r.totalSteps(),
	}
	return r, nil
}

// setHook hands every gradient to the pipeline; with --profile-out, rank 0 also times the
// hooks, with a separate hook so that a run without it pays nothing.
func (r *run) setHook() error {
	push := func(id int, grad []float32) {
		if err := r.pipe.Push(id, grad); err != nil && r.hookErr == nil {
			r.hookErr = err
		}
	}
	if r.tl != nil {
		hand := push
		push = func(id int, grad []float32) {
			start := time.Now()
			hand(id, grad)
			r.tl.add(laneGradients, r.params[id].Name, start, time.Now(), len(grad))
		}
	}
	if r.cfg.ProfileOut == "" {
		r.model.SetHook(push)
		return nil
	}
	// Every rank times its steps, for the profile's jitter; rank 0 writes the profile.
	if r.rank == 0 {
		if err := checkProfileOut(r.cfg.ProfileOut); err != nil {
			return err
		}
	}
	r.prof = newProfiler(len(r.params), r.totalSteps())
	r.model.SetHook(func(id int, grad []float32) {
		called := time.Now()
		push(id, grad)
		r.prof.hooked(id, called, time.Now())
	})
	return nil
}

func (r *run) close() {
	r.pipe.Close()
	r.model.Close()
}

// totalSteps is when training stops: after --max-steps, after --epochs, whichever comes first;
// one epoch when neither is given.
func (r *run) totalSteps() int {
	perEpoch := r.data.train.StepsPerEpoch()
	switch {
	case r.cfg.Epochs > 0 && r.cfg.MaxSteps > 0:
		return min(r.cfg.MaxSteps, r.cfg.Epochs*perEpoch)
	case r.cfg.MaxSteps > 0:
		return r.cfg.MaxSteps
	case r.cfg.Epochs > 0:
		return r.cfg.Epochs * perEpoch
	}
	return perEpoch
}

func (r *run) train(ctx context.Context) error {
	total, perEpoch := r.totalSteps(), r.data.train.StepsPerEpoch()
	r.opts.Logf("training %s on %s: %d parameters in %d tensors, %d steps (%d per epoch), pipeline %s",
		r.cfg.Model, r.cfg.Dataset, r.numParams(), len(r.params), total, perEpoch, r.cfg.Pipeline)
	if r.comm != nil && r.rank == 0 {
		r.opts.Logf("ranks talk through %v", r.comm) // which transport: shared memory, TCP, MPI
	}
	if err := r.begin(); err != nil {
		return err
	}
	if r.rank == 0 {
		var err error
		if r.live, err = openLiveMetrics(r.cfg.Out, r.rows); err != nil {
			return err
		}
		defer r.live.close()
		if r.cfg.TensorBoard {
			if r.board, err = tensorboard.Create(filepath.Join(r.cfg.Out, "tensorboard")); err != nil {
				return err
			}
			defer r.board.Close()
		}
		// From the start summary.json says the run is under way, in case no evaluation
		// comes before its end.
		if err := r.writeProgress(); err != nil {
			return err
		}
	}
	for epoch := r.step / perEpoch; r.step < total; epoch++ {
		r.data.train.StartEpoch(epoch)
		if pos := r.step - epoch*perEpoch; pos > 0 {
			r.data.train.Seek(pos) // resumed mid-epoch; the model's state was restored
		} else if rec, ok := r.model.(nets.Recurrent); ok {
			rec.ResetState()
		}
		bar := newProgress(r.opts, r.cfg.LogEvery, epoch, min(perEpoch*(epoch+1), total)-r.step)
		for r.step < total && r.data.train.Next(&r.batch) {
			if err := ctx.Err(); err != nil {
				bar.finish()
				return fmt.Errorf("interrupted at step %d: %w", r.step, err)
			}
			row, err := r.trainStep()
			if err != nil {
				bar.finish()
				return fmt.Errorf("step %d (epoch %d): %w", r.step, epoch, err)
			}
			if err := r.record(row); err != nil {
				bar.finish()
				return err
			}
			r.step++
			bar.update(row, r.samplesPerStep())
			if err := r.diverged(row); err != nil {
				bar.finish()
				return err
			}
			if err := r.afterStep(total); err != nil {
				bar.finish()
				return err
			}
			if r.opts.AfterStep != nil {
				r.opts.AfterStep(r.step)
			}
		}
		bar.finish()
	}
	if err := r.evaluate(); err != nil {
		return err
	}
	if r.tl != nil {
		return r.tl.write(r.cfg.Out)
	}
	return nil
}

// begin starts the run afresh, every rank from rank 0's parameters, or resumes it from the
// checkpoint in --resume.
func (r *run) begin() error {
	if r.cfg.Resume == "" {
		if r.cfg.CheckpointEvery > 0 {
			// A checkpoint left by an earlier run in this folder is not this run's.
			if err := r.removeCheckpoints(0); err != nil {
				return err
			}
		}
		if err := r.broadcastInitial(); err != nil {
			return err
		}
		r.start = time.Now()
		return nil
	}
	step, err := r.resumeStep()
	if err != nil {
		return err
	}
	if err := r.restore(step); err != nil {
		return err
	}
	r.opts.Logf("resumed from the checkpoint of step %d in %s", step, r.cfg.Resume)
	return nil
}

// afterStep does what follows a step: the consistency check, the evaluations due (every
// --eval-every steps, or at the end of each epoch) and the checkpoint due. The last step's
// evaluation is left to the end of training.
func (r *run) afterStep(total int) error {
	if err := r.checkConsistency(r.step == total); err != nil {
		return err
	}
	every := r.cfg.EvalEvery
	if every <= 0 {
		every = r.data.train.StepsPerEpoch()
	}
	if r.step%every == 0 && r.step < total {
		if err := r.evaluate(); err != nil {
			return err
		}
	}
	return r.maybeCheckpoint(total)
}

func (r *run) trainStep() (Row, error) {
	r.prof.beginStep(r.step)
	if r.tl != nil {
		r.tl.beginStep(r.step)
	}
	stepStart := time.Now() // zeroing the gradients is part of the step's time, not of compute
	ZeroGrad(r.params)
	start := time.Now()
	r.prof.beginCompute(start)
	res, err := r.model.TrainStep(&r.batch)
	computed := time.Now()
	if err == nil {
		err, r.hookErr = r.hookErr, nil
	}
	if err != nil {
		return Row{}, err
	}
	compute := computed.Sub(start)
	r.tl.add(laneCompute, "forward and backward", start, computed, 0)
	if err := r.pipe.Wait(); err != nil {
		return Row{}, fmt.Errorf("synchronising gradients: %w", err)
	}
	waited := time.Now()
	r.tl.add(laneWait, "wait", computed, waited, 0)
	r.prof.beginUpdate(computed)
	norm, err := ClipGradNorm(r.params, r.cfg.ClipNorm)
	if err != nil {
		return Row{}, err
	}
	lr := r.sched.LR(r.step)
	r.opt.Step(r.params, lr)
	r.tl.add(laneUpdate, "update", waited, time.Now(), 0)
	r.prof.endStep()
	m := r.pipe.Metrics()
	row := Row{
		Kind: "train", Step: r.step, Epoch: r.epochsDone(1), WallS: time.Since(r.start).Seconds(),
		LR: lr, Loss: res.Loss, GradNorm: norm, Samples: r.samplesPerStep(),
		StepMS: StepMS{Total: ms(time.Since(stepStart)), Compute: ms(compute), Sparsify: ms(m.Sparsify), Comm: ms(m.Comm), Wait: ms(m.Wait)},
		Bytes:  m.BytesSent,
	}
	if m.HasDensity {
		d, missing := m.DensityAchieved, m.TensorsMissing
		row.Density, row.Missing = &d, &missing
	}
	if imbalance := m.Extra[pipeline.PartitionImbalance]; imbalance > 0 {
		row.Imbal = &imbalance
	}
	r.stats.add(row, m)
	return row, nil
}

// epochsDone counts epochs after extra more steps.
func (r *run) epochsDone(extra int) float64 {
	return float64(r.step+extra) / float64(r.data.train.StepsPerEpoch())
}

func (r *run) evaluate() error {
	if err := r.broadcastBuffers(); err != nil {
		return err
	}
	ev, err := r.evaluateAll()
	if err != nil {
		return fmt.Errorf("evaluating after step %d: %w", r.step, err)
	}
	step := r.step
	ev.Step = &step
	r.lastRes = ev
	err = r.record(Row{Kind: "eval", Step: r.step, Epoch: r.epochsDone(0), WallS: time.Since(r.start).Seconds(),
		Samples: ev.Samples, EvalAcc: ev.Accuracy, EvalLoss: ev.Loss, EvalPPL: ev.Perplexity})
	if err == nil && r.live != nil {
		err = r.writeProgress()
	}
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("eval after step %d: loss %.4g", r.step, *ev.Loss)
	if ev.Perplexity != nil {
		msg += fmt.Sprintf(", perplexity %.2f", *ev.Perplexity)
	}
	r.opts.Logf("%s, accuracy %.2f%% on %d samples", msg, 100**ev.Accuracy, ev.Samples)
	return r.saveIfBest(ev)
}

// saveIfBest writes the weights as the best evaluation's when ev beats every earlier
// evaluation of the run, resumed parts included (their rows are the record): the highest
// accuracy, or for a language model the lowest loss, whose exponential is the perplexity.
func (r *run) saveIfBest(ev *Eval) error {
	if !r.cfg.SaveBest || r.rank != 0 {
		return nil
	}
	score := func(acc, loss *float64) float64 {
		if r.cfg.IsLanguageModel() {
			return -*loss
		}
		return *acc
	}
	now := score(ev.Accuracy, ev.Loss)
	for _, row := range r.rows {
		if row.Kind == "eval" && row.Step != r.step && row.EvalAcc != nil && row.EvalLoss != nil &&
			score(row.EvalAcc, row.EvalLoss) >= now {
			return nil
		}
	}
	meta := map[string]string{"best_step": strconv.Itoa(r.step),
		"best_accuracy": strconv.FormatFloat(*ev.Accuracy, 'g', -1, 64),
		"best_loss":     strconv.FormatFloat(*ev.Loss, 'g', -1, 64)}
	if err := r.writeWeights(bestWeightsFile, meta); err != nil {
		return err
	}
	r.opts.Logf("best evaluation so far: wrote %s", filepath.Join(r.cfg.Out, bestWeightsFile))
	return nil
}

// evaluateAll evaluates every rank's shard of the test split and combines the results.
func (r *run) evaluateAll() (*Eval, error) {
	t, err := evaluate(r.model, r.data.test)
	if err != nil {
		return nil, err
	}
	if t, err = r.sumTallies(t); err != nil {
		return nil, err
	}
	if t.count == 0 {
		return nil, errors.New("the test split yielded no samples")
	}
	loss, acc := t.lossSum/t.count, t.correct/t.count
	ev := &Eval{Samples: int(t.count), Loss: &loss, Accuracy: &acc}
	if r.cfg.IsLanguageModel() {
		ppl := math.Exp(loss)
		ev.Perplexity = &ppl
	}
	return ev, nil
}

// tally sums what evaluation measured over batches.
type tally struct{ lossSum, correct, count float64 }

// evaluate runs the whole test source in eval mode.
func evaluate(model nets.Model, src source) (tally, error) {
	if rec, ok := model.(nets.Recurrent); ok {
		rec.ResetEvalState()
	}
	src.StartEpoch(0)
	var b nets.Batch
	var t tally
	for src.Next(&b) {
		res, err := model.Evaluate(&b)
		if err != nil {
			return tally{}, err
		}
		t.lossSum += res.Loss * float64(res.Count)
		t.correct += float64(res.Correct)
		t.count += float64(res.Count)
	}
	return t, nil
}

func (r *run) numParams() int {
	n := 0
	for _, p := range r.params {
		n += p.Numel()
	}
	return n
}

// samplesPerStep counts the samples of one step over all ranks.
func (r *run) samplesPerStep() int { return r.world * r.data.train.SamplesPerBatch() }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
