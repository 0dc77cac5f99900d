package baselines

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/fusion"
	"github.com/ssfusion/ssfusion/pipeline"
)

// warmupTimer measures, over the warm-up steps of a pipeline that re-plans its buffers
// from them (SAFusion, OMGS-SGD), each tensor's backward time and the time its Process call
// spent, and has the ranks agree on rank 0's means.
//
// A tensor's backward time is the time from the return of the previous Process call of the
// step to the start of this one: what the model spent between the two gradients (the first
// tensor of a step gets 0, since the start of backward is not seen; the planners do not
// need it). Only steps whose gradients arrive as backward produces them are timed, not the
// replayed first step.
type warmupTimer struct {
	steps  int // warm-up steps in all
	warmed int // warm-up steps finished
	timed  int // of which timed

	backward, process         []time.Duration // by tensor id: sums over the timed steps
	stepBackward, stepProcess []time.Duration // the current step's
	lastEnd                   time.Time       // when the previous Process call returned...
	lastStep                  int             // ...in this step
}

func newWarmupTimer(steps, tensors int) *warmupTimer {
	return &warmupTimer{steps: steps,
		backward: make([]time.Duration, tensors), process: make([]time.Duration, tensors),
		stepBackward: make([]time.Duration, tensors), stepProcess: make([]time.Duration, tensors)}
}

// timing reports whether the current step is timed.
func (w *warmupTimer) timing(e fusion.Engine) bool { return w.warmed < w.steps && !e.Replayed() }

// begin starts timing tensor id's Process call, if the step is timed, and returns its start.
func (w *warmupTimer) begin(e fusion.Engine, id int) time.Time {
	start := e.Clock().Now()
	if w.timing(e) {
		var b time.Duration
		if w.lastStep == e.Step() && !w.lastEnd.IsZero() {
			b = start.Sub(w.lastEnd)
		}
		w.stepBackward[id] = b
	}
	return start
}

// prepared records that tensor id's part of the work ended, the part a planner counts as
// its selection time.
func (w *warmupTimer) prepared(e fusion.Engine, id int, start time.Time) {
	if w.timing(e) {
		w.stepProcess[id] = e.Clock().Since(start)
	}
}

// end records the return of tensor id's Process call.
func (w *warmupTimer) end(e fusion.Engine) {
	if w.timing(e) {
		w.lastEnd, w.lastStep = e.Clock().Now(), e.Step()
	}
}

// stepDone ends a step; it reports true at the end of the last warm-up step, when the
// pipeline should re-plan.
func (w *warmupTimer) stepDone(e fusion.Engine) bool {
	if w.warmed >= w.steps {
		return false
	}
	if !e.Replayed() {
		for id := range w.backward {
			w.backward[id] += w.stepBackward[id]
			w.process[id] += w.stepProcess[id]
		}
		w.timed++
	}
	w.warmed++
	return w.warmed == w.steps
}

// agree broadcasts rank 0's mean times, in seconds, of the tensors in order, so that every
// rank plans from the same figures; every rank must call it at the end of the same step,
// after the step's collectives have completed, so that the broadcast is matched.
func (w *warmupTimer) agree(comm dist.Communicator, order []int) (backward, process []float64, err error) {
	const floatBytes = 8
	wire := make([]byte, 2*floatBytes*len(order))
	if comm.Rank() == 0 && w.timed > 0 {
		for i, id := range order {
			binary.LittleEndian.PutUint64(wire[2*floatBytes*i:], math.Float64bits(w.backward[id].Seconds()/float64(w.timed)))
			binary.LittleEndian.PutUint64(wire[2*floatBytes*i+floatBytes:], math.Float64bits(w.process[id].Seconds()/float64(w.timed)))
		}
	}
	if err := comm.Broadcast(wire, 0); err != nil {
		return nil, nil, fmt.Errorf("agreeing on the warm-up timings: %w", err)
	}
	backward, process = make([]float64, len(order)), make([]float64, len(order))
	for i, id := range order {
		b := math.Float64frombits(binary.LittleEndian.Uint64(wire[2*floatBytes*i:]))
		s := math.Float64frombits(binary.LittleEndian.Uint64(wire[2*floatBytes*i+floatBytes:]))
		if !(b >= 0 && s >= 0) || math.IsInf(b+s, 0) {
			return nil, nil, fmt.Errorf("rank 0 sent timings %g s and %g s for tensor %d", b, s, id)
		}
		backward[i], process[i] = b, s
	}
	return backward, process, nil
}

// planOrder is the backprop order the buckets hold, which warm-up timings are agreed in.
func planOrder(buckets []fusion.Bucket) []int {
	var order []int
	for _, b := range buckets {
		order = append(order, b.Tensors...)
	}
	return order
}

// replanInto asks e to adopt, from the next step on, buffers that cut order into groups of
// counts[i] consecutive tensors.
func replanInto(e fusion.Engine, tensors []pipeline.Tensor, order, counts []int) error {
	buckets, err := fusion.GroupBuckets(order, func(id int) int { return len(tensors[id].Grad) }, counts)
	if err != nil {
		return err
	}
	return e.Replan(buckets)
}

// sizesOf lists the element counts of the tensors in order.
func sizesOf(tensors []pipeline.Tensor, order []int) []int {
	sizes := make([]int, len(order))
	for i, id := range order {
		sizes[i] = len(tensors[id].Grad)
	}
	return sizes
}
