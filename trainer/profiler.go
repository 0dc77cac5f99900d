package trainer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/nets"
	"github.com/ssfusion/ssfusion/profile"
)

// profiler times the model's compute in every training step for --profile-out: forward, the
// backward time between consecutive gradients, the rest of backward and the update. Time spent
// inside the pipeline's Push (a sparsifying pipeline may select there) is not the model's and
// is left out. Every rank profiles (rank 0's times make the profile, every rank's step totals
// its jitter); without --profile-out the profiler is nil and the step's calls on it do
// nothing, so that such a run does no timing work.
type profiler struct {
	n int // gradient tensors per step

	// The step being recorded.
	step        int       // its number, for errors
	zeroStart   time.Time // before the gradients are zeroed
	start       time.Time // TrainStep called
	computed    time.Time // TrainStep returned
	updateStart time.Time // clipping begins
	hooks       []hookTime

	order []int           // tensor ids in the backprop order of the first recorded step
	times []time.Duration // per recorded step, stride fields(): forward, backward by position, tail, update
	err   error           // why recording stopped
}

// hookTime is one gradient hook: when it was called and when the pipeline's Push returned.
type hookTime struct {
	id               int
	called, returned time.Time
}

// warmupSteps are left out of the mean when there are enough steps, since the first steps
// pay for allocation and cold caches.
const warmupSteps = 2

// newProfiler profiles n gradient tensors over about steps steps.
func newProfiler(n, steps int) *profiler {
	p := &profiler{n: n, hooks: make([]hookTime, 0, n)}
	// Room for the expected steps up front, within reason: a long run grows the slice instead.
	p.times = make([]time.Duration, 0, min(steps*p.fields(), 1<<20))
	return p
}

// fields is the number of durations recorded per step.
func (p *profiler) fields() int { return p.n + 3 }

// beginStep starts recording step step. Zeroing the gradients, which follows, counts as
// update time: it is per-step work of the optimizer, not of the model.
func (p *profiler) beginStep(step int) {
	if p == nil {
		return
	}
	p.step, p.hooks = step, p.hooks[:0]
	p.zeroStart = time.Now()
}

// beginCompute notes when TrainStep was called.
func (p *profiler) beginCompute(t time.Time) {
	if p != nil {
		p.start = t
	}
}

// hooked notes one gradient hook.
func (p *profiler) hooked(id int, called, returned time.Time) {
	p.hooks = append(p.hooks, hookTime{id, called, returned})
}

// beginUpdate notes when TrainStep returned and when clipping begins.
func (p *profiler) beginUpdate(computed time.Time) {
	if p != nil {
		p.computed, p.updateStart = computed, time.Now()
	}
}

// endStep records the step whose update just ended.
func (p *profiler) endStep() {
	if p == nil || p.err != nil {
		return
	}
	update := time.Since(p.updateStart) + p.start.Sub(p.zeroStart)
	if p.err = p.checkOrder(); p.err != nil {
		return
	}
	// The model does not say when backward starts, so the first tensor's share of backward
	// stays in forward: its readiness time, which is what a replay needs, is right. Each
	// later share starts when the previous Push returned.
	p.times = append(p.times, p.hooks[0].called.Sub(p.start), 0)
	for i := 1; i < len(p.hooks); i++ {
		p.times = append(p.times, p.hooks[i].called.Sub(p.hooks[i-1].returned))
	}
	p.times = append(p.times, p.computed.Sub(p.hooks[len(p.hooks)-1].returned), update)
}

// checkOrder compares the current step's gradients with the first recorded step's.
func (p *profiler) checkOrder() error {
	if p.n == 0 {
		return errors.New("the model has no gradients to profile")
	}
	if len(p.hooks) != p.n {
		return fmt.Errorf("step %d announced %d gradients, the model has %d", p.step, len(p.hooks), p.n)
	}
	if p.order == nil {
		p.order = make([]int, p.n)
		for i, h := range p.hooks {
			p.order[i] = h.id
		}
		return nil
	}
	for i, h := range p.hooks {
		if h.id != p.order[i] {
			return fmt.Errorf("step %d announced gradient %d at position %d of backprop, where the first profiled step had gradient %d: the order changed between steps",
				p.step, h.id, i, p.order[i])
		}
	}
	return nil
}

// steps is the number of recorded steps.
func (p *profiler) steps() int { return len(p.times) / p.fields() }

// result is the per-field mean of the steps after the warm-up (of all steps when there are
// fewer than 4), with the tensors named and sized from params.
func (p *profiler) result(params []nets.Param) (prof *profile.Profile, used int, err error) {
	if p.err != nil {
		return nil, 0, p.err
	}
	steps := p.steps()
	if steps == 0 {
		return nil, 0, errors.New("no training step was measured")
	}
	first := p.firstUsed()
	mean := p.means(first)
	prof = &profile.Profile{ForwardMS: mean[0], TailMS: mean[p.n+1], UpdateMS: mean[p.n+2]}
	prof.Tensors = make([]profile.Tensor, p.n)
	for i, id := range p.order {
		prof.Tensors[i] = profile.Tensor{Name: params[id].Name, Numel: params[id].Numel(), Dims: len(params[id].Shape), Shape: params[id].Shape, BackwardMS: mean[i+1]}
	}
	return prof, steps - first, nil
}

// firstUsed is the first step the profile averages: the warm-up is left out when there are
// enough steps.
func (p *profiler) firstUsed() int {
	if p.steps() >= 2*warmupSteps {
		return warmupSteps
	}
	return 0
}

// stepTotals returns each averaged step's compute in milliseconds: every field but the
// update.
func (p *profiler) stepTotals() []float64 {
	k := p.fields()
	var totals []float64
	for s := p.firstUsed(); s < p.steps(); s++ {
		t := 0.0
		for f := range k - 1 {
			t += ms(p.times[s*k+f])
		}
		totals = append(totals, t)
	}
	return totals
}

// maxJitter caps how many steps a profile's jitter keeps; a long run keeps an even sample.
const maxJitter = 512

// jitterMatrix turns every rank's step totals (byRank[r][s]; rank 0 first) into the
// profile's ComputeJitter: by step, every rank's compute over rank 0's mean, since the
// profile's times are rank 0's means. It returns nil when the ranks measured different
// numbers of steps or nothing was timed.
func jitterMatrix(byRank [][]float64) [][]float64 {
	if len(byRank) == 0 || len(byRank[0]) == 0 {
		return nil
	}
	steps := len(byRank[0])
	for _, totals := range byRank {
		if len(totals) != steps {
			return nil
		}
		for _, t := range totals {
			if !(t > 0) {
				return nil // nothing was timed: no ratios to give
			}
		}
	}
	sum := 0.0
	for _, t := range byRank[0] {
		sum += t
	}
	mean := sum / float64(steps)
	stride := max(1, (steps+maxJitter-1)/maxJitter)
	var out [][]float64
	for s := 0; s < steps; s += stride {
		row := make([]float64, len(byRank))
		for r, totals := range byRank {
			row[r] = totals[s] / mean
		}
		out = append(out, row)
	}
	return out
}

// means returns, per field, the mean in milliseconds over the steps from first on. Means,
// not medians: the simulator predicts the mean step time, and the means of the fields add up
// to the mean of the whole, where medians of many small fields would leave out every pause
// (a collection, a preempted thread) that lands in a different field each step.
func (p *profiler) means(first int) []float64 {
	k := p.fields()
	mean := make([]float64, k)
	for s := first; s < p.steps(); s++ {
		for f := range k {
			mean[f] += ms(p.times[s*k+f])
		}
	}
	for f := range mean {
		mean[f] /= float64(p.steps() - first)
	}
	return mean
}

// gatherJitter gives rank 0 every rank's compute per step, for the profile's jitter. Every
// rank of a job that trained to the end calls it, in the same place.
func (r *run) gatherJitter() error {
	own := r.prof.stepTotals()
	if r.comm == nil {
		r.jitter = jitterMatrix([][]float64{own})
		return nil
	}
	send := make([]float32, len(own))
	for i, t := range own {
		send[i] = float32(t)
	}
	all, err := dist.AllGatherFloat32(r.comm, send)
	if err != nil {
		return fmt.Errorf("gathering the ranks' step times for the profile: %w", err)
	}
	byRank := make([][]float64, len(all))
	for rank, totals := range all {
		byRank[rank] = make([]float64, len(totals))
		for i, t := range totals {
			byRank[rank][i] = float64(t)
		}
	}
	r.jitter = jitterMatrix(byRank)
	return nil
}

// writeProfile writes what the profiler measured to --profile-out.
func (r *run) writeProfile() error {
	prof, used, err := r.prof.result(r.params)
	if err != nil {
		return fmt.Errorf("profile %s: %w", r.cfg.ProfileOut, err)
	}
	host, err := os.Hostname()
	if err != nil {
		host = "an unknown host"
	}
	prof.Model, prof.BatchSize, prof.ComputeJitter = r.cfg.Model, r.cfg.BatchSize, r.jitter
	prof.Source = fmt.Sprintf("measured by train on %s in a %d-worker job with pipeline %s: mean of %d of %d steps",
		host, r.world, r.cfg.Pipeline, used, r.prof.steps())
	if err := prof.Save(r.cfg.ProfileOut); err != nil {
		return err
	}
	r.opts.Logf("wrote the compute profile %s", r.cfg.ProfileOut)
	return nil
}

// checkProfileOut fails a run whose profile could not be written before it trains, rather
// than after.
func checkProfileOut(path string) error {
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("profile-out %s: folder %s does not exist", path, dir)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("profile-out %s is a folder", path)
	}
	return nil
}
