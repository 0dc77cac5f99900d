package baselines

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/fusion"
	"github.com/ssfusion/ssfusion/pipeline"
)

// DefaultCupcakeTrialSteps is how many steps NewCupcake times each candidate partition for.
const DefaultCupcakeTrialSteps = 3

// NewCupcake returns Cupcake's compression scheduler (Wang et al., MLSys 2023, after their
// MergeComp): the model's tensors, in backprop order, are merged into y groups, and each
// group is compressed by one call of the selector (top-k by default; --selector dgc gives
// DGC's) with error feedback and sent by one allgather as soon as its last gradient
// arrives, so that the fixed cost of a compression call and of a message is paid y times a
// step rather than once per tensor. As with multi-tensor sparsification, a tensor whose
// elements all lose to its group's threshold goes missing.
//
// y is found online, from measured step times, as the released MergeComp scheduler finds
// its split: the pipeline tries y = 1, 2, 3, ... groups, each cut to hold about the same
// number of elements, for trialSteps steps each, and stops at the first y slower than the
// one before (the step time is taken to fall, then rise, with y), keeping the fastest.
// Rank 0's mean step time decides, broadcast so that every rank switches alike. Steps are
// timed from the first gradient's arrival to the end of the step's communication. The
// first trial starts after the first step, whose gradients are replayed and cannot be
// timed. trialSteps 0 means DefaultCupcakeTrialSteps.
//
// A checkpoint carries, besides the memory, the search: the partition in use, the mean
// step time of every partition tried, the current trial's steps and seconds, and whether
// the search is over; a resumed run continues it, or keeps its choice, from its first
// step on. A state saved at another world size or for other tensors is refused.
func NewCupcake(comm dist.Communicator, tensors []pipeline.Tensor, cfg compress.Config, trialSteps int) (pipeline.Pipeline, error) {
	p, _, err := newCupcake(comm, tensors, cfg, trialSteps)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func newCupcake(comm dist.Communicator, tensors []pipeline.Tensor, cfg compress.Config, trialSteps int) (*planStated, *cupcake, error) {
	if comm == nil {
		return nil, nil, errors.New("Cupcake: no communicator")
	}
	if err := cfg.Check(); err != nil {
		return nil, nil, fmt.Errorf("Cupcake: %w", err)
	}
	switch {
	case trialSteps == 0:
		trialSteps = DefaultCupcakeTrialSteps
	case trialSteps < 1:
		return nil, nil, fmt.Errorf("Cupcake: %d trial steps per partition: need at least 1", trialSteps)
	}
	s := &cupcake{selfPlanned: selfPlanned{multiTensor: multiTensor{sparseStage: sparseStage{comm: comm, tensors: tensors, cfg: cfg}}},
		trialSteps: trialSteps, groups: 1, times: map[int]float64{}}
	// The first plan is one group: the threshold holds every tensor.
	f, err := fusion.New(comm, tensors, math.MaxInt32, s, true)
	if err != nil {
		return nil, nil, fmt.Errorf("Cupcake: %w", err)
	}
	return &planStated{Fusion: f, stage: s}, s, nil
}

// cupcake is Cupcake's stage: multi-tensor sparsification over y balanced groups, y
// searched for in the first steps.
type cupcake struct {
	selfPlanned
	trialSteps int

	groups  int             // the partition in use: its number of groups
	times   map[int]float64 // mean step seconds by number of groups tried
	done    bool            // the search has settled
	trial   float64         // seconds summed over the current trial's steps
	trialed int             // steps timed in the current trial
	start   time.Time       // the current step's first gradient
	started int             // ...in this step (-1: none yet)

	stepTime func(groups int) float64 // test hook replacing the measured step time, nil in use
}

// Plan builds the partition in use: its groups hold about equal elements.
func (p *cupcake) Plan(e fusion.Engine, buckets []fusion.Bucket) ([]int, bool, error) {
	return p.planGroups(e, buckets, balancedGroups(sizesOf(p.tensors, planOrder(buckets)), p.groups))
}

func (p *cupcake) Process(id int, s fusion.Slot, grad []float32) error {
	if step := p.e.Step(); p.started != step+1 {
		p.start, p.started = p.e.Clock().Now(), step+1
	}
	return p.selfPlanned.Process(id, s, grad)
}

// Finish averages the step's groups and moves the search on.
func (p *cupcake) Finish() error {
	if err := p.multiTensor.Finish(); err != nil {
		return err
	}
	p.e.Meter().SetExtra(GroupsMetric, float64(len(p.buckets)))
	if p.done || p.e.Replayed() {
		return nil
	}
	elapsed := p.e.Clock().Since(p.start).Seconds()
	if p.stepTime != nil {
		elapsed = p.stepTime(p.groups)
	}
	p.trial += elapsed
	p.trialed++
	if p.trialed < p.trialSteps {
		return nil
	}
	mean, err := p.agree(p.trial / float64(p.trialed))
	if err != nil {
		return fmt.Errorf("Cupcake: %w", err)
	}
	p.times[p.groups] = mean
	p.trial, p.trialed = 0, 0
	next, done := p.nextCandidate()
	p.done = done
	if next == p.groups {
		return nil
	}
	if err := p.partition(next); err != nil {
		return fmt.Errorf("Cupcake: %w", err)
	}
	return nil
}

// nextCandidate is the number of groups to try next, and whether the search is over (then
// it is the best one tried).
func (p *cupcake) nextCandidate() (int, bool) {
	y := p.groups
	prev, tried := p.times[y-1]
	if (tried && p.times[y] > prev) || y >= len(p.tensors) {
		best := 1
		for g, t := range p.times {
			if t < p.times[best] || (t == p.times[best] && g < best) {
				best = g
			}
		}
		return best, true
	}
	return y + 1, false
}

// agree broadcasts rank 0's mean step time, so that every rank takes the same decision.
func (p *cupcake) agree(seconds float64) (float64, error) {
	wire := binary.LittleEndian.AppendUint64(nil, math.Float64bits(seconds))
	if err := p.comm.Broadcast(wire, 0); err != nil {
		return 0, fmt.Errorf("agreeing on the step time: %w", err)
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(wire))
	if !(v >= 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("rank 0 sent a step time of %g s", v)
	}
	return v, nil
}

// partition re-plans the tensors into groups of about equal elements.
func (p *cupcake) partition(groups int) error {
	order := planOrder(p.buckets)
	if err := replanInto(p.e, p.tensors, order, balancedGroups(sizesOf(p.tensors, order), groups)); err != nil {
		return err
	}
	p.groups = groups
	return nil
}

// balancedGroups cuts consecutive sizes into groups (at most one per size) of about equal
// sums and returns how many sizes each holds: group g ends at the first size whose prefix
// sum reaches g+1 shares of the total, and every group keeps at least one size.
func balancedGroups(sizes []int, groups int) []int {
	groups = max(1, min(groups, len(sizes)))
	total := 0
	for _, n := range sizes {
		total += n
	}
	counts := make([]int, 0, groups)
	sum, start := 0, 0
	for i, n := range sizes {
		sum += n
		g := len(counts)
		left := len(sizes) - 1 - i        // sizes after this one
		need := groups - 1 - g            // groups still to start after this one
		full := sum*groups >= (g+1)*total // this group has its share
		if g < groups-1 && (full || left == need) && left >= need {
			counts = append(counts, i+1-start)
			start = i + 1
		}
	}
	return append(counts, len(sizes)-start)
}

// cupcakeStateMagic starts Cupcake's state in a checkpoint, with its version.
const cupcakeStateMagic = "CPCK\x01"

// extraState encodes the search, which shapes Cupcake's later steps beyond the engine's
// state: the partition in use, whether the search is over, the current trial's steps and
// seconds, and the mean step time of every partition tried. The layout, after the magic
// and the setting (appendSetting), is u32 trial steps, u32 groups in use, u32 done (0 or
// 1), u32 steps of the current trial, f64 their seconds, u32 partitions tried, then for
// each, by ascending groups, u32 groups and f64 seconds.
func (p *cupcake) extraState() []byte {
	b := appendSetting([]byte(cupcakeStateMagic), p.comm.Size(), p.tensors)
	b = binary.LittleEndian.AppendUint32(b, uint32(p.trialSteps))
	b = binary.LittleEndian.AppendUint32(b, uint32(p.groups))
	done := uint32(0)
	if p.done {
		done = 1
	}
	b = binary.LittleEndian.AppendUint32(b, done)
	b = binary.LittleEndian.AppendUint32(b, uint32(p.trialed))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.trial))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(p.times)))
	for _, g := range slices.Sorted(maps.Keys(p.times)) {
		b = binary.LittleEndian.AppendUint32(b, uint32(g))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.times[g]))
	}
	return b
}

// restoreExtra checks st's part of Cupcake against this pipeline and adopts it; on error
// nothing changes. A state taken before the first step may lack it: there is nothing to
// adopt then.
func (p *cupcake) restoreExtra(st pipeline.State) (undo func(), err error) {
	const what = "Cupcake state"
	r, err := readOwnState(what, cupcakeStateMagic, "search of the partition", st, p.comm.Size(), p.tensors)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return func() {}, nil
	}
	n := len(p.tensors)
	trialSteps, groups, done, trialed := r.u32("the trial steps"), r.u32("the groups in use"), r.u32("the end of the search"), r.u32("the current trial's steps")
	trial := math.Float64frombits(r.u64("the current trial's seconds"))
	tried := r.u32("the partitions tried")
	if r.err != nil {
		return nil, r.err
	}
	if int64(tried) > int64(n) {
		return nil, fmt.Errorf("%s: %d partitions tried of %d tensors", what, tried, n)
	}
	times := make(map[int]float64, tried)
	last := 0
	for range tried {
		g, t := int(r.u32("a partition tried")), math.Float64frombits(r.u64("a partition's step time"))
		if r.err != nil {
			return nil, r.err
		}
		if g <= last || g > n || !(t >= 0) || math.IsInf(t, 0) {
			return nil, fmt.Errorf("%s: a partition of %d groups tried after one of %d, taking %g s a step, for %d tensors", what, g, last, t, n)
		}
		times[g], last = t, g
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	switch {
	case groups < 1 || int64(groups) > int64(max(n, 1)):
		return nil, fmt.Errorf("%s: %d groups in use for %d tensors", what, groups, n)
	case groups > 1 && st.Order == nil:
		return nil, fmt.Errorf("%s: %d groups in use but no backprop order to cut into them", what, groups)
	case done > 1:
		return nil, fmt.Errorf("%s: %d is not a flag for the end of the search", what, done)
	case !(trial >= 0) || math.IsInf(trial, 0):
		return nil, fmt.Errorf("%s: the current trial took %g s", what, trial)
	case done == 0 && int64(trialSteps) != int64(p.trialSteps):
		return nil, fmt.Errorf("%s: saved in a search trying each partition for %d steps, this pipeline tries each for %d", what, trialSteps, p.trialSteps)
	case done == 0 && trialed >= trialSteps:
		return nil, fmt.Errorf("%s: %d steps into a trial of %d", what, trialed, trialSteps)
	}
	wasGroups, wasDone, wasTrialed, wasTrial, wasTimes := p.groups, p.done, p.trialed, p.trial, p.times
	p.groups, p.done, p.trialed, p.trial, p.times = int(groups), done == 1, int(trialed), trial, times
	return func() {
		p.groups, p.done, p.trialed, p.trial, p.times = wasGroups, wasDone, wasTrialed, wasTrial, wasTimes
	}, nil
}
