package baselines

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

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
//
// Merging saves mostly the start-up of allgathers, so a network without start-up cost (an
// emulated link with no latency) plans about one group per tensor: OMGS-SGD then selects
// as per-tensor sparsification does, with a budget of density times each tensor's size
// however large its gradient, and converges as slowly.
//
// A checkpoint carries, besides the memory, the warm-up's progress and summed timings and,
// once made, the merge plan: a run resumed during the warm-up plans at the same step from
// the timings of every warm-up step, one resumed after it keeps the saved groups from its
// first step on. A state saved at another world size or for other tensors is refused.
func NewOMGS(comm dist.Communicator, tensors []pipeline.Tensor, thresholdBytes int, cfg compress.Config, net netmodel.Network, selectSeconds float64, warmupSteps int) (pipeline.Pipeline, error) {
	p, _, err := newOMGS(comm, tensors, thresholdBytes, cfg, net, selectSeconds, warmupSteps)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func newOMGS(comm dist.Communicator, tensors []pipeline.Tensor, thresholdBytes int, cfg compress.Config, net netmodel.Network, selectSeconds float64, warmupSteps int) (*planStated, *omgs, error) {
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
	s := &omgs{selfPlanned: selfPlanned{multiTensor: multiTensor{sparseStage: sparseStage{comm: comm, tensors: tensors, cfg: cfg}}},
		net: net, selectSeconds: selectSeconds, timer: newWarmupTimer(warmupSteps, len(tensors))}
	f, err := fusion.New(comm, tensors, thresholdBytes, s, true)
	if err != nil {
		return nil, nil, fmt.Errorf("OMGS-SGD: %w", err)
	}
	return &planStated{Fusion: f, stage: s}, s, nil
}

// omgs is OMGS-SGD's stage: multi-tensor sparsification whose groups are re-planned once.
type omgs struct {
	selfPlanned
	net           netmodel.Network
	selectSeconds float64
	timer         *warmupTimer
	merges        []int                                  // tensors per group, in backprop order; nil before the re-plan
	onReplan      func(backward []float64, counts []int) // test hook, nil in use
}

// Plan builds the groups of the merge plan, or the engine's buffers during the warm-up.
func (p *omgs) Plan(e fusion.Engine, buckets []fusion.Bucket) ([]int, bool, error) {
	return p.planGroups(e, buckets, p.merges)
}

func (p *omgs) Process(id int, s fusion.Slot, grad []float32) error {
	start := p.timer.begin(p.e, id)
	err := p.selfPlanned.Process(id, s, grad)
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
	if err := replanInto(p.e, p.tensors, order, counts); err != nil {
		return err
	}
	p.merges = counts
	return nil
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

// omgsStateMagic starts OMGS-SGD's state in a checkpoint, with its version.
const omgsStateMagic = "OMGS\x01"

// extraState encodes what shapes OMGS-SGD's later steps beyond the engine's state: the
// warm-up's progress and summed timings, from which the plan is made at its end, and the
// merge plan once made. The layout, after the magic and the setting (appendSetting), is
// u32 warm-up steps, u32 steps warmed, u32 steps timed, by tensor id i64 nanoseconds of
// backward and of Process, u32 groups (0 before the plan), and u32 tensors per group.
func (p *omgs) extraState() []byte {
	b := appendSetting([]byte(omgsStateMagic), p.comm.Size(), p.tensors)
	w := p.timer
	b = binary.LittleEndian.AppendUint32(b, uint32(w.steps))
	b = binary.LittleEndian.AppendUint32(b, uint32(w.warmed))
	b = binary.LittleEndian.AppendUint32(b, uint32(w.timed))
	for id := range w.backward {
		b = binary.LittleEndian.AppendUint64(b, uint64(w.backward[id]))
		b = binary.LittleEndian.AppendUint64(b, uint64(w.process[id]))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(p.merges)))
	for _, c := range p.merges {
		b = binary.LittleEndian.AppendUint32(b, uint32(c))
	}
	return b
}

// restoreExtra checks st's part of OMGS-SGD against this pipeline and adopts it; on error
// nothing changes. A state taken before the first step may lack it: there is nothing to
// adopt then.
func (p *omgs) restoreExtra(st pipeline.State) (undo func(), err error) {
	const what = "OMGS-SGD state"
	r, err := readOwnState(what, omgsStateMagic, "warm-up or merge plan", st, p.comm.Size(), p.tensors)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return func() {}, nil
	}
	n := len(p.tensors)
	steps, warmed, timed := int(r.u32("the warm-up's length")), int(r.u32("the steps warmed")), int(r.u32("the steps timed"))
	backward, process := make([]time.Duration, n), make([]time.Duration, n)
	for id := range n {
		backward[id] = time.Duration(r.u64("a backward time"))
		process[id] = time.Duration(r.u64("a selection time"))
		if backward[id] < 0 || process[id] < 0 {
			return nil, fmt.Errorf("%s: tensor %d's summed times %v and %v are negative", what, id, backward[id], process[id])
		}
	}
	merges, err := r.counts("merge plan", n)
	if err != nil {
		return nil, err
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	switch over := warmed >= steps; {
	case steps < 2 || warmed > steps || timed > warmed:
		return nil, fmt.Errorf("%s: %d of %d warm-up steps done, %d of them timed: not a warm-up OMGS-SGD runs", what, warmed, steps, timed)
	case !over && steps != p.timer.steps:
		return nil, fmt.Errorf("%s: saved %d steps into a warm-up of %d, this pipeline's warm-up takes %d", what, warmed, steps, p.timer.steps)
	case over && merges == nil:
		return nil, fmt.Errorf("%s: the warm-up is over but the state holds no merge plan", what)
	case !over && merges != nil:
		return nil, fmt.Errorf("%s: a merge plan %d steps into a warm-up of %d", what, warmed, steps)
	case merges != nil && st.Order == nil:
		return nil, fmt.Errorf("%s: a merge plan but no backprop order to apply it to", what)
	}
	w := p.timer
	wasWarmed, wasTimed, wasMerges := w.warmed, w.timed, p.merges
	wasBackward, wasProcess := slices.Clone(w.backward), slices.Clone(w.process)
	w.warmed, w.timed = warmed, timed
	if warmed >= steps {
		w.warmed = w.steps // over, however long this pipeline's warm-up
	}
	copy(w.backward, backward)
	copy(w.process, process)
	p.merges = merges
	return func() {
		w.warmed, w.timed, p.merges = wasWarmed, wasTimed, wasMerges
		copy(w.backward, wasBackward)
		copy(w.process, wasProcess)
	}, nil
}

// selfPlanned is multi-tensor sparsification over groups of consecutive tensors that the
// stage plans itself (OMGS-SGD's merges, Cupcake's partitions). The stage, not the fusion
// engine, places each tensor in its group and counts the group's arrivals: a pipeline
// restored from a checkpoint runs its first step with the saved groups, while the engine
// plans its buffers from the byte threshold and adopts another plan only at the end of a
// step.
type selfPlanned struct {
	multiTensor
	slots     []fusion.Slot // by tensor id: its place in the groups
	arrived   []int         // by group: tensors processed in step arrivedIn
	arrivedIn int
}

// planGroups plans groups of counts[i] consecutive tensors of the engine's backprop order,
// or the engine's buckets when counts is nil.
func (p *selfPlanned) planGroups(e fusion.Engine, buckets []fusion.Bucket, counts []int) ([]int, bool, error) {
	if counts != nil {
		var err error
		buckets, err = fusion.GroupBuckets(planOrder(buckets), func(id int) int { return len(p.tensors[id].Grad) }, counts)
		if err != nil {
			return nil, false, fmt.Errorf("grouping the tensors: %w", err)
		}
	}
	parts, serial, err := p.multiTensor.Plan(e, buckets)
	if err != nil {
		return nil, false, err
	}
	p.slots = make([]fusion.Slot, len(p.tensors))
	for b, bucket := range buckets {
		for i, id := range bucket.Tensors {
			p.slots[id] = fusion.Slot{Bucket: b, Index: i, Offset: bucket.Offsets[i]}
		}
	}
	p.arrived, p.arrivedIn = make([]int, len(buckets)), -1
	return parts, serial, nil
}

// Process hands the gradient on with its place in the stage's groups, whatever the
// engine's buckets. The arrivals restart with every step, also after a failed one.
func (p *selfPlanned) Process(id int, _ fusion.Slot, grad []float32) error {
	if step := p.e.Step(); step != p.arrivedIn {
		clear(p.arrived)
		p.arrivedIn = step
	}
	s := p.slots[id]
	p.arrived[s.Bucket]++
	s.Last = p.arrived[s.Bucket] == len(p.buckets[s.Bucket].Tensors)
	return p.multiTensor.Process(id, s, grad)
}

// planStater is a stage whose state between steps shapes its fusion plan.
type planStater interface {
	// extraState encodes the state.
	extraState() []byte
	// restoreExtra checks the stage's part of st (its Extra) against the pipeline and
	// adopts it, returning what undoes that; on error it changes nothing.
	restoreExtra(st pipeline.State) (undo func(), err error)
}

// planStated is a fusing pipeline whose stage keeps, beyond error-feedback memory, state
// that shapes its fusion plan (OMGS-SGD, Cupcake), carried in pipeline.State.Extra. The
// stage must hold that state when the engine plans the restored pipeline, inside
// fusion.Fusion.Restore, which hands a fusion.ExtraStater its state only after planning;
// so the pipeline hands it to the stage itself, first.
type planStated struct {
	*fusion.Fusion
	stage planStater
}

// State implements pipeline.Stateful: the engine's state, with the stage's in Extra.
func (p *planStated) State() (pipeline.State, error) {
	st, err := p.Fusion.State()
	if err != nil {
		return pipeline.State{}, err
	}
	st.Extra = p.stage.extraState()
	return st, nil
}

// Restore implements pipeline.Stateful.
func (p *planStated) Restore(st pipeline.State) error {
	undo, err := p.stage.restoreExtra(st)
	if err != nil {
		return err
	}
	st.Extra = nil // the stage's, adopted already
	if err := p.Fusion.Restore(st); err != nil {
		undo()
		return err
	}
	return nil
}

// appendSetting encodes what the state of a stage that plans its own groups holds only
// for: u32 world size, u32 tensors and u32 elements of each.
func appendSetting(b []byte, world int, tensors []pipeline.Tensor) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(world))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(tensors)))
	for _, t := range tensors {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(t.Grad)))
	}
	return b
}

// stateReader decodes a stage's state, little-endian. After the first field that is cut
// short it reads zeros and keeps that error.
type stateReader struct {
	what string // whose state, for errors
	b    []byte
	err  error
}

// newStateReader reads the state b, which must start with magic.
// readOwnState opens a pipeline's own part of st, checked against this run's world size
// and tensors. A state taken before the first step may lack it: readOwnState then returns
// no reader and no error, there being nothing to adopt; a later state without it is
// refused, saying that it holds no lacking.
func readOwnState(what, magic, lacking string, st pipeline.State, world int, tensors []pipeline.Tensor) (*stateReader, error) {
	if len(st.Extra) == 0 {
		if st.Steps == 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: the state of step %d holds no %s (saved by another pipeline or build?)", what, st.Steps, lacking)
	}
	r, err := newStateReader(what, magic, st.Extra)
	if err != nil {
		return nil, err
	}
	if err := r.checkSetting(world, tensors); err != nil {
		return nil, err
	}
	return r, nil
}

func newStateReader(what, magic string, b []byte) (*stateReader, error) {
	rest, ok := bytes.CutPrefix(b, []byte(magic))
	if !ok {
		return nil, fmt.Errorf("%s: does not start with its magic and version %d (saved by another pipeline or build?)", what, magic[len(magic)-1])
	}
	return &stateReader{what: what, b: rest}, nil
}

func (r *stateReader) take(n int, field string) []byte {
	if r.err != nil {
		return make([]byte, n)
	}
	if len(r.b) < n {
		r.err = fmt.Errorf("%s: cut short before %s", r.what, field)
		return make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *stateReader) u32(field string) uint32 { return binary.LittleEndian.Uint32(r.take(4, field)) }
func (r *stateReader) u64(field string) uint64 { return binary.LittleEndian.Uint64(r.take(8, field)) }

// end reports the first field cut short, or bytes left over.
func (r *stateReader) end() error {
	if r.err == nil && len(r.b) > 0 {
		return fmt.Errorf("%s: %d bytes more than its fields", r.what, len(r.b))
	}
	return r.err
}

// checkSetting reads what appendSetting wrote and reports the first way in which it
// differs from this run's.
func (r *stateReader) checkSetting(world int, tensors []pipeline.Tensor) error {
	w, n := r.u32("the world size"), r.u32("the number of tensors")
	switch {
	case r.err != nil:
		return r.err
	case int64(w) != int64(world):
		return fmt.Errorf("%s: saved at %d ranks, this run has %d", r.what, w, world)
	case int64(n) != int64(len(tensors)):
		return fmt.Errorf("%s: saved for %d tensors, this model has %d", r.what, n, len(tensors))
	}
	for id, t := range tensors {
		m := r.u32("the tensors' sizes")
		if r.err != nil {
			return r.err
		}
		if int64(m) != int64(len(t.Grad)) {
			return fmt.Errorf("%s: tensor %d (%s) had %d elements when saved, has %d", r.what, id, t.Name, m, len(t.Grad))
		}
	}
	return nil
}

// counts reads a plan of groups of n tensors, u32 groups and u32 tensors per group: nil
// when it has no groups.
func (r *stateReader) counts(what string, n int) ([]int, error) {
	g := r.u32("the " + what)
	if r.err != nil {
		return nil, r.err
	}
	if int64(g) > int64(n) {
		return nil, fmt.Errorf("%s: a %s of %d groups for %d tensors", r.what, what, g, n)
	}
	if g == 0 {
		return nil, nil
	}
	counts := make([]int, g)
	total := 0
	for i := range counts {
		counts[i] = int(r.u32("the " + what))
		if r.err != nil {
			return nil, r.err
		}
		if counts[i] == 0 {
			return nil, fmt.Errorf("%s: group %d of the %s is empty", r.what, i, what)
		}
		total += counts[i]
	}
	if total != n {
		return nil, fmt.Errorf("%s: the %s groups %d tensors, the model has %d", r.what, what, total, n)
	}
	return counts, nil
}
