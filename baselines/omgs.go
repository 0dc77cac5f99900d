package baselines

import (
	"errors"
	"fmt"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/fusion"
	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
)

// GroupsMetric names, in pipeline.StepMetrics.Extra, the number of groups (fusion buffers)
// a pipeline that plans them itself (OMGS-SGD, Cupcake) used in the step.
const GroupsMetric = "groups"

// DefaultOMGSWarmup is NewOMGS's number of warm-up steps, with ordinary buffers, timing
// backward.
const DefaultOMGSWarmup = 5

// NewOMGS returns OMGS-SGD (Shi et al., INFOCOM 2020: merged-gradient sparsification):
// consecutive tensors' gradients, in backprop order, are merged into groups, each sparsified
// by one top-k over the group (with error feedback) as soon as its last gradient arrives, on
// the goroutine running backward, and allgathered while backward goes on; as in multi-tensor
// sparsification, a tensor whose elements all lose to the group's threshold goes missing.
//
// The groups come from a cost model of the step (planMerges): the first warmupSteps steps
// run with ordinary buffers of up to thresholdBytes while each tensor's backward time is
// measured; at the end of the last one rank 0's means are broadcast and every rank plans the
// same groups from them, with selection costing selectSeconds per element (the shared
// --select-ns) and the allgather of a group's pairs costed by net, the zero value meaning a
// flat network over 10 Gbit/s links (netmodel.NetworkPreset). warmupSteps 0 means
// DefaultOMGSWarmup; otherwise it must be at least 2, since the first step of a fresh
// pipeline replays its gradients and cannot be timed.
func NewOMGS(comm dist.Communicator, tensors []pipeline.Tensor, thresholdBytes int, cfg compress.Config, net netmodel.Network, selectSeconds float64, warmupSteps int) (pipeline.Pipeline, error) {
	f, _, err := newOMGS(comm, tensors, thresholdBytes, cfg, net, selectSeconds, warmupSteps)
	return f, err
}

func newOMGS(comm dist.Communicator, tensors []pipeline.Tensor, thresholdBytes int, cfg compress.Config, net netmodel.Network, selectSeconds float64, warmupSteps int) (*fusion.Fusion, *omgs, error) {
	if comm == nil {
		return nil, nil, errors.New("OMGS-SGD: no communicator")
	}
	if err := cfg.Check(); err != nil {
		return nil, nil, fmt.Errorf("OMGS-SGD: %w", err)
	}
	if net == (netmodel.Network{}) {
		net = defaultSAFusionNetwork()
	}
	if err := net.Check(); err != nil {
		return nil, nil, fmt.Errorf("OMGS-SGD: %w", err)
	}
	if !(selectSeconds >= 0) {
		return nil, nil, fmt.Errorf("OMGS-SGD: selection time per element must be >= 0, got %g s", selectSeconds)
	}
	switch {
	case warmupSteps == 0:
		warmupSteps = DefaultOMGSWarmup
	case warmupSteps < 2:
		return nil, nil, fmt.Errorf("OMGS-SGD: %d warm-up steps: need at least 2, as the first step cannot be timed", warmupSteps)
	}
	s := &omgs{multiTensor: multiTensor{sparseStage: sparseStage{comm: comm, tensors: tensors, cfg: cfg}},
		net: net, selectSeconds: selectSeconds, timer: newWarmupTimer(warmupSteps, len(tensors))}
	f, err := fusion.New(comm, tensors, thresholdBytes, s, true)
	if err != nil {
		return nil, nil, fmt.Errorf("OMGS-SGD: %w", err)
	}
	return f, s, nil
}

// omgs is OMGS-SGD's stage: multi-tensor sparsification whose buffers are re-planned once.
type omgs struct {
	multiTensor
	net           netmodel.Network
	selectSeconds float64
	timer         *warmupTimer
	onReplan      func(backward []float64, counts []int) // test hook, nil in use
}

func (p *omgs) Process(id int, s fusion.Slot, grad []float32) error {
	start := p.timer.begin(p.e, id)
	err := p.multiTensor.Process(id, s, grad)
	p.timer.prepared(p.e, id, start)
	p.timer.end(p.e)
	return err
}

// Finish averages the step's groups and, at the end of the warm-up, re-plans them.
func (p *omgs) Finish() error {
	if err := p.multiTensor.Finish(); err != nil {
		return err
	}
	p.e.Meter().SetExtra(GroupsMetric, float64(len(p.buckets)))
	if !p.timer.stepDone(p.e) {
		return nil
	}
	if err := p.replan(); err != nil {
		return fmt.Errorf("OMGS-SGD: merging the gradients: %w", err)
	}
	return nil
}

func (p *omgs) replan() error {
	order := planOrder(p.buckets)
	backward, _, err := p.timer.agree(p.comm, order)
	if err != nil {
		return err
	}
	sizes := sizesOf(p.tensors, order)
	world := p.comm.Size()
	comm := func(elements, tensors int) float64 {
		// The groups are planned for the target density, which holds after any DGC
		// density warm-up.
		k := compress.KFor(elements, p.cfg.Density)
		bytes := compress.SparseCountBytes + tensors*compress.SparseHeaderBytes + compress.SparsePairBytes*k
		return p.net.AllGather(world, bytes).Seconds()
	}
	counts := planMerges(backward, sizes, p.selectSeconds, comm)
	if p.onReplan != nil {
		p.onReplan(backward, counts)
	}
	return replanInto(p.e, p.tensors, order, counts)
}

// planMerges is OMGS-SGD's merge of consecutive gradients into groups, as its paper's cost
// model of a step defines it and its authors' code walks it: it returns how many consecutive
// tensors, given in backprop order, each group holds.
//
// The step's model: backward produces tensor i's gradient backward[i] seconds after the
// previous one (backward[0] is not used); when a group's last gradient is ready, its top-k
// runs on backward's own goroutine, taking selectSeconds per element of the group, and so
// delays the rest of backward; then its pairs are allgathered, taking comm(elements,
// tensors) seconds, once the previous group's allgather has finished.
//
// Walking the tensors, the open group either closes before tensor i or takes it in. Taking
// it in saves comm(group) + comm(tensor i) - comm(both): a start-up, mostly. It costs a
// later start of the group's allgather, by tensor i's backward plus the change in selection
// time (none under a linear cost), less the time the group would have waited anyway for
// the previous group's allgather to free the link. The group takes tensor i in when that
// cost is below the saving. Unlike its authors' code, which merges the last tensor without
// asking, every tensor is weighed alike.
//
// The result depends on nothing but its arguments, so every rank that plans from the same
// timings plans the same groups.
func planMerges(backward []float64, sizes []int, selectSeconds float64, comm func(elements, tensors int) float64) []int {
	if len(sizes) == 0 {
		return nil
	}
	selection := func(n int) float64 { return selectSeconds * float64(n) }
	var counts []int
	t := 0.0        // when backward produced the open group's last gradient
	linkFree := 0.0 // when the last closed group's allgather ends
	n, count := sizes[0], 1
	for i := 1; i < len(sizes); i++ {
		ready := t + selection(n) // the open group's pairs, were it closed now
		slack := max(0, linkFree-ready)
		merged := n + sizes[i]
		cost := backward[i] + selection(merged) - selection(n) - selection(sizes[i]) - slack
		saving := comm(n, count) + comm(sizes[i], 1) - comm(merged, count+1)
		if cost < saving {
			n, count = merged, count+1
			t += backward[i]
			continue
		}
		linkFree = max(linkFree, ready) + comm(n, count)
		counts = append(counts, count)
		t = ready + backward[i]
		n, count = sizes[i], 1
	}
	return append(counts, count)
}
