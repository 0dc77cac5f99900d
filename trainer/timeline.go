package trainer

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/pipeline"
)

// Timeline lanes: what rank 0's step spends its time on, one row each in the chart.
const (
	laneCompute    = "forward and backward"
	laneGradients  = "gradients handed over"
	laneSelection  = "selection"
	laneCollective = "collectives"
	laneWait       = "waiting for the pipeline"
	laneUpdate     = "clip and update"
)

var timelineLanes = []string{laneCompute, laneGradients, laneSelection, laneCollective, laneWait, laneUpdate}

// TimelineFile is the Chrome trace (chrome://tracing, ui.perfetto.dev) of the steps that
// --timeline-steps records.
const TimelineFile = "timeline.json"

// timeline records what rank 0's last steps spent their time on: the model's forward and
// backward pass, each gradient's hand-over to the pipeline, every selection (on whichever
// goroutine ran it), every collective from its call to its completion, the wait for the
// pipeline after backward, and the update. It shows whether selection overlapped backward
// or waited for a core.
type timeline struct {
	mu     sync.Mutex
	from   int // the first step recorded
	origin time.Time
	step   int // the step under way; recording while step >= from
	spans  []span
}

// span is one interval of a lane; an instant has End == Start.
type span struct {
	Lane, Name string
	Step       int
	Start, End time.Time
	Elements   int // elements selected over, or bytes of a collective; 0 when not known
}

func newTimeline(from int) *timeline { return &timeline{from: from, step: -1} }

// beginStep starts recording at step from.
func (t *timeline) beginStep(step int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.step = step
	if step == t.from {
		t.origin = time.Now()
	}
}

// add records a span of the step under way, when it is one recorded.
func (t *timeline) add(lane, name string, start, end time.Time, elements int) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.step < t.from || t.origin.IsZero() {
		return
	}
	t.spans = append(t.spans, span{Lane: lane, Name: name, Step: t.step, Start: start, End: end, Elements: elements})
}

// traceEvent is an event of the Chrome trace format: a complete event ("X") with its
// duration, or a thread's name ("M"); times in microseconds.
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// trace encodes the recorded spans in the Chrome trace format, a lane per thread.
func (t *timeline) trace() ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var events []traceEvent
	for i, lane := range timelineLanes {
		events = append(events, traceEvent{Name: "thread_name", Ph: "M", TID: i, Args: map[string]any{"name": lane}})
	}
	for _, s := range t.spans {
		args := map[string]any{"step": s.Step}
		if s.Elements > 0 {
			args["size"] = s.Elements
		}
		events = append(events, traceEvent{Name: s.Name, Cat: s.Lane, Ph: "X", PID: 0, TID: slices.Index(timelineLanes, s.Lane),
			TS: micros(s.Start.Sub(t.origin)), Dur: micros(s.End.Sub(s.Start)), Args: args})
	}
	return json.MarshalIndent(map[string]any{"traceEvents": events, "displayTimeUnit": "ms"}, "", " ")
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// write saves the trace into dir.
func (t *timeline) write(dir string) error {
	raw, err := t.trace()
	if err != nil {
		return fmt.Errorf("encoding the timeline: %w", err)
	}
	return WriteFileAtomic(filepath.Join(dir, TimelineFile), raw)
}

// timedComm records every collective of the communicator it wraps, from its call to its
// completion, and hands the pipeline a clock that records every selection.
type timedComm struct {
	dist.Communicator
	tl    *timeline
	clock pipeline.Clock
}

func newTimedComm(comm dist.Communicator, tl *timeline) *timedComm {
	return &timedComm{Communicator: comm, tl: tl, clock: timedClock{Clock: pipeline.ClockOf(comm), tl: tl}}
}

// Clock implements pipeline.Clocked.
func (c *timedComm) Clock() pipeline.Clock { return c.clock }

func (c *timedComm) done(name string, start time.Time, size int) {
	c.tl.add(laneCollective, name, start, time.Now(), size)
}

func (c *timedComm) AllReduce(buf []float32, op dist.Op) error {
	start := time.Now()
	defer c.done("allreduce", start, 4*len(buf))
	return c.Communicator.AllReduce(buf, op)
}

func (c *timedComm) AllReduceAsync(buf []float32, op dist.Op) dist.Handle {
	return timedHandle{c.Communicator.AllReduceAsync(buf, op), c, "allreduce", time.Now(), 4 * len(buf)}
}

func (c *timedComm) AllGatherV(send []byte) ([][]byte, error) {
	start := time.Now()
	defer c.done("allgather", start, len(send))
	return c.Communicator.AllGatherV(send)
}

func (c *timedComm) AllGatherVAsync(send []byte) dist.GatherHandle {
	return timedGather{c.Communicator.AllGatherVAsync(send), c, "allgather", time.Now(), len(send)}
}

func (c *timedComm) AllToAllV(send [][]byte) ([][]byte, error) {
	start := time.Now()
	defer c.done("all-to-all", start, totalLen(send))
	return c.Communicator.AllToAllV(send)
}

func (c *timedComm) AllToAllVAsync(send [][]byte) dist.GatherHandle {
	return timedGather{c.Communicator.AllToAllVAsync(send), c, "all-to-all", time.Now(), totalLen(send)}
}

func (c *timedComm) SendRecv(send []byte, to, from int) ([]byte, error) {
	start := time.Now()
	defer c.done("send-recv", start, len(send))
	return c.Communicator.SendRecv(send, to, from)
}

func (c *timedComm) Broadcast(buf []byte, root int) error {
	start := time.Now()
	defer c.done("broadcast", start, len(buf))
	return c.Communicator.Broadcast(buf, root)
}

func (c *timedComm) BroadcastAsync(buf []byte, root int) dist.Handle {
	return timedHandle{c.Communicator.BroadcastAsync(buf, root), c, "broadcast", time.Now(), len(buf)}
}

func (c *timedComm) Barrier() error {
	start := time.Now()
	defer c.done("barrier", start, 0)
	return c.Communicator.Barrier()
}

func totalLen(parts [][]byte) int {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	return n
}

// timedHandle records its collective when Wait returns: from the call that started it to
// the first moment the caller learned it was done.
type timedHandle struct {
	dist.Handle
	c     *timedComm
	name  string
	start time.Time
	size  int
}

func (h timedHandle) Wait() error {
	defer h.c.done(h.name, h.start, h.size)
	return h.Handle.Wait()
}

type timedGather struct {
	dist.GatherHandle
	c     *timedComm
	name  string
	start time.Time
	size  int
}

func (h timedGather) Wait() ([][]byte, error) {
	defer h.c.done(h.name, h.start, h.size)
	return h.GatherHandle.Wait()
}

// timedClock records every piece of work a pipeline times (its selections) as it ends.
type timedClock struct {
	pipeline.Clock
	tl *timeline
}

func (c timedClock) Work(start time.Time, kind string, n int) time.Duration {
	d := c.Clock.Work(start, kind, n)
	c.tl.add(laneSelection, kind, start, start.Add(d), n)
	return d
}
