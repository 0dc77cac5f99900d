package baselines

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
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
func NewCupcake(comm dist.Communicator, tensors []pipeline.Tensor, cfg compress.Config, trialSteps int) (pipeline.Pipeline, error) {
	f, _, err := newCupcake(comm, tensors, cfg, trialSteps)
	return f, err
}

func newCupcake(comm dist.Communicator, tensors []pipeline.Tensor, cfg compress.Config, trialSteps int) (*fusion.Fusion, *cupcake, error) {
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
	s := &cupcake{multiTensor: multiTensor{sparseStage: sparseStage{comm: comm, tensors: tensors, cfg: cfg}},
		trialSteps: trialSteps, groups: 1, times: map[int]float64{}}
	// The first plan is one group: the threshold holds every tensor.
	f, err := fusion.New(comm, tensors, math.MaxInt32, s, true)
	if err != nil {
		return nil, nil, fmt.Errorf("Cupcake: %w", err)
	}
	return f, s, nil
}

// cupcake is Cupcake's stage: multi-tensor sparsification over y balanced groups, y
// searched for in the first steps.
type cupcake struct {
	multiTensor
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

func (p *cupcake) Process(id int, s fusion.Slot, grad []float32) error {
	if step := p.e.Step(); p.started != step+1 {
		p.start, p.started = p.e.Clock().Now(), step+1
	}
	return p.multiTensor.Process(id, s, grad)
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
