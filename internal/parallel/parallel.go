// Package parallel splits loops over [0, n) across goroutines, for the compute kernels
// (package kernels) and the Gorgonia ops of package nets, which share it so that both split
// their work the same way: as many goroutines as GOMAXPROCS allows, the caller's among them
// and pooled helpers for the rest (pool.go).
//
// A panic in any piece is re-raised on the calling goroutine once every piece has stopped, so
// that the caller can recover it where it would have recovered a panic of a serial loop (the
// ops turn it into an error).
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// limit, when positive, caps Workers below GOMAXPROCS: a process-wide setting, as
// GOMAXPROCS is, that leaves the process's other threads to other work (such as selection
// offloaded to goroutines of its own).
var limit atomic.Int64

// SetLimit caps the goroutines work is split across at n, below GOMAXPROCS; n <= 0 lifts
// the cap. It returns the previous cap.
func SetLimit(n int) int { return int(limit.Swap(int64(max(n, 0)))) }

// Workers is the number of goroutines work is split across: GOMAXPROCS, or the cap SetLimit
// set when that is lower.
func Workers() int {
	w := runtime.GOMAXPROCS(0)
	if n := int(limit.Load()); n > 0 {
		w = min(w, n)
	}
	return w
}

// chunks is the number of pieces For splits n items into.
func chunks(n, minPerChunk int) int {
	w := Workers()
	if minPerChunk < 1 {
		minPerChunk = 1
	}
	if m := n / minPerChunk; m < w {
		w = m
	}
	return max(w, 1)
}

// For runs fn over [0, n) split into at most Workers() contiguous pieces of at least
// minPerChunk items each (a single piece when n is smaller); chunk is the index of the piece, so
// that fn can use per-chunk scratch space prepared beforehand. A single piece runs inline;
// otherwise the caller and the pool's helpers take the pieces as Dynamic's, each piece once.
func For(n, minPerChunk int, fn func(chunk, lo, hi int)) {
	w := chunks(n, minPerChunk)
	if w == 1 {
		fn(0, 0, n)
		return
	}
	runJob(n, w, w, nil, fn)
}

// Dynamic runs fn over [0, n) cut into pieces contiguous ranges (fewer when n is smaller), which
// min(Workers(), pieces) goroutines, the caller's among them, take one after another as they
// finish the previous one. worker (below DynamicWorkers(n, pieces)) names the goroutine, for
// per-goroutine scratch space; piece names the range, for results that must not depend on which
// goroutine ran it. On a machine shared with other processes one core often runs at a fraction of
// the other's speed, and For's pieces, one per core, then wait for the slower one; with more
// pieces than cores the faster core takes more of them.
func Dynamic(n, pieces int, fn func(worker, piece, lo, hi int)) {
	pieces = min(pieces, n)
	if pieces <= 0 {
		return
	}
	w := min(Workers(), pieces)
	if w == 1 {
		for p := 0; p < pieces; p++ {
			fn(0, p, p*n/pieces, (p+1)*n/pieces)
		}
		return
	}
	runJob(n, pieces, w, fn, nil)
}

// runJob runs the pieces of [0, n) on w goroutines, the caller's and w-1 helpers, each taking
// the next piece as it finishes one; a piece runs fn, or for For chunk, which takes no worker.
func runJob(n, pieces, w int, fn func(worker, piece, lo, hi int), chunk func(chunk, lo, hi int)) {
	j := jobs.Get().(*job)
	j.n, j.pieces, j.fn, j.chunk, j.perr = n, pieces, fn, chunk, nil
	j.next.Store(0)
	j.helpers.Add(int32(w - 1))
	for i := 1; i < w; i++ {
		help(j.helper, i)
	}
	j.run(0)
	waitFor(&j.helpers)
	perr := j.perr
	j.fn, j.chunk, j.perr = nil, nil, nil
	jobs.Put(j) // no helper touches j once waitFor has returned
	if perr != nil {
		panic(perr) // re-raised on the caller's goroutine
	}
}

// job is what the goroutines of one For or Dynamic call share, kept from one call to the next
// (in jobs, with its helper method bound once) so that a call allocates nothing.
type job struct {
	n, pieces int
	fn        func(worker, piece, lo, hi int) // Dynamic's
	chunk     func(chunk, lo, hi int)         // For's, when fn is nil
	helper    func(worker int)                // j.runAndDone, bound once
	next      atomic.Int64
	helpers   atomic.Int32 // helpers still taking pieces
	mu        sync.Mutex
	perr      any
}

var jobs = sync.Pool{New: func() any {
	j := &job{}
	j.helper = j.runAndDone
	return j
}}

func (j *job) runAndDone(worker int) {
	defer j.helpers.Add(-1)
	j.run(worker)
}

// run takes pieces until none is left, keeping a panic for the caller.
func (j *job) run(worker int) {
	defer func() {
		if r := recover(); r != nil {
			j.mu.Lock()
			j.perr = r
			j.mu.Unlock()
			j.next.Store(int64(j.pieces)) // the others stop after their current piece
		}
	}()
	for {
		p := int(j.next.Add(1) - 1)
		if p >= j.pieces {
			return
		}
		lo, hi := p*j.n/j.pieces, (p+1)*j.n/j.pieces
		if j.fn != nil {
			j.fn(worker, p, lo, hi)
		} else {
			j.chunk(p, lo, hi)
		}
	}
}

// DynamicWorkers is the number of goroutines Dynamic runs for n items in the given number of
// pieces, so that per-goroutine scratch space can be prepared beforehand.
func DynamicWorkers(n, pieces int) int {
	return max(1, min(Workers(), pieces, n))
}
