package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The helpers of Dynamic and For are goroutines kept from one call to the next, which
// look for their next piece of work for a while before they sleep. A goroutine started for
// every call, or woken from sleep, begins only after the runtime has woken an idle core's
// thread, which on a virtual machine can take longer than a small call's work: the second
// core then joins late or not at all, and a training step makes hundreds of such calls
// (BenchmarkDynamic measures a call of 200 µs of work). The pool is the process's, as the
// cores are. A call takes helpers that are free, so that calls from several goroutines at
// once never share one; when none is free (more calls at once than the pool holds) it
// starts a goroutine as before.

// helperSpin is how long an idle helper keeps looking for work before it sleeps: longer than
// the gaps between the parallel calls of a training step's consecutive ops, short enough that
// a process that stops calling gives its cores back at once.
const helperSpin = 100 * time.Microsecond

// maxHelpers bounds the pool, per core.
const maxHelpers = 4

// helper is one pooled goroutine. The call that took it (busy) writes its task, fn to run as
// worker, and then sets posted, after which only the helper touches the task.
type helper struct {
	busy   atomic.Bool // taken by a call, until its task has run
	fn     func(worker int)
	worker int
	posted atomic.Bool
	asleep atomic.Bool
	wake   chan struct{} // one token: a post that found the helper asleep
}

// helpers is the pool.
var helpers struct {
	mu   sync.Mutex
	list []*helper
}

// help runs fn(worker) on a free helper, or on a new goroutine when the pool has none.
func help(fn func(worker int), worker int) {
	if h := freeHelper(); h != nil {
		h.post(fn, worker)
		return
	}
	go fn(worker)
}

// freeHelper takes a free helper, starting one if the pool has room, or returns nil.
func freeHelper() *helper {
	helpers.mu.Lock()
	defer helpers.mu.Unlock()
	for _, h := range helpers.list {
		if h.busy.CompareAndSwap(false, true) {
			return h
		}
	}
	if len(helpers.list) >= maxHelpers*runtime.GOMAXPROCS(0) {
		return nil
	}
	h := &helper{wake: make(chan struct{}, 1)}
	h.busy.Store(true)
	helpers.list = append(helpers.list, h)
	go h.loop()
	return h
}

// post hands the helper its task.
func (h *helper) post(fn func(worker int), worker int) {
	h.fn, h.worker = fn, worker
	h.posted.Store(true)
	if h.asleep.CompareAndSwap(true, false) {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

// helperYield is how often a looking helper lets the process's other goroutines run. Yielding
// at every look cost nearly as much as sleeping: the runtime often took tens of microseconds
// to run the helper again.
const helperYield = 20 * time.Microsecond

// loop runs the helper's tasks: after each, it is free again and keeps looking for the next
// for helperSpin, letting the process's other goroutines run every helperYield, then sleeps
// until a post. A leftover wake token only makes it look once more.
func (h *helper) loop() {
	for {
		idle := time.Now()
		yielded := idle
		for now := idle; now.Sub(idle) < helperSpin; now = time.Now() {
			if h.posted.Load() {
				fn, worker := h.fn, h.worker
				h.fn = nil
				h.posted.Store(false)
				fn(worker)
				h.busy.Store(false)
				idle, yielded = time.Now(), time.Now()
				continue
			}
			for i := 0; i < 64 && !h.posted.Load(); i++ {
			}
			if now.Sub(yielded) > helperYield {
				runtime.Gosched()
				yielded = time.Now()
			}
		}
		h.asleep.Store(true)
		if !h.posted.Load() {
			<-h.wake
		}
		h.asleep.Store(false)
	}
}

// waitFor returns once *left is zero: the caller's wait for the helpers of its call, who are
// at most one piece behind it. It looks rather than sleeps, letting other goroutines run in
// between: a caller asleep is woken by the helper that finishes last and queued on that
// helper's core, where it waits until the helper yields.
func waitFor(left *atomic.Int32) {
	for left.Load() > 0 {
		for i := 0; i < 64 && left.Load() > 0; i++ {
		}
		runtime.Gosched()
	}
}
