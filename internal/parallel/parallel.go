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

// Workers is the number of goroutines work is split across.
func Workers() int { return runtime.GOMAXPROCS(0) }

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
// otherwise the calling goroutine runs the first piece itself.
func For(n, minPerChunk int, fn func(chunk, lo, hi int)) {
	w := chunks(n, minPerChunk)
	if w == 1 {
		fn(0, 0, n)
		return
	}
	j := forJobs.Get().(*forJob)
	j.fn, j.n, j.w, j.perr = fn, n, w, nil
	j.helpers.Add(int32(w - 1))
	for c := 1; c < w; c++ {
		help(j.share, c)
	}
	j.do(0, 0, n/w)
	waitFor(&j.helpers)
	perr := j.perr
	j.fn, j.perr = nil, nil
	forJobs.Put(j) // no helper touches j once waitFor has returned
	if perr != nil {
		panic(perr) // re-raised on the caller's goroutine
	}
}

// forJob is what the goroutines of one For call share, kept from one call to the next (in
// forJobs, with its share method bound once) so that a call allocates nothing.
type forJob struct {
	fn      func(chunk, lo, hi int)
	n, w    int
	share   func(c int)  // j.runShare, bound once
	helpers atomic.Int32 // helpers still running their piece
	mu      sync.Mutex
	perr    any
}

var forJobs = sync.Pool{New: func() any {
	j := &forJob{}
	j.share = j.runShare
	return j
}}

// runShare runs share c of the call on a helper.
func (j *forJob) runShare(c int) {
	defer j.helpers.Add(-1)
	j.do(c, c*j.n/j.w, (c+1)*j.n/j.w)
}

// do runs one piece, keeping a panic for the caller.
func (j *forJob) do(c, lo, hi int) {
	defer func() {
		if r := recover(); r != nil {
			j.mu.Lock()
			j.perr = r
			j.mu.Unlock()
		}
	}()
	j.fn(c, lo, hi)
}

// Dynamic runs fn over [0, n) cut into pieces contiguous ranges (fewer when n is smaller), which
// min(Workers(), pieces) goroutines, the caller's among them, take one after another as they
// finish the previous one. worker (below DynamicWorkers(n, pieces)) names the goroutine, for
// per-goroutine scratch space; piece names the range, for results that must not depend on which
// goroutine ran it. On a machine shared with other processes one core often runs at a fraction of
// the other's speed, and For's fixed halves then wait for the slower one; here the faster core
// takes more pieces.
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
	j := dynamicJobs.Get().(*dynamicJob)
	j.n, j.pieces, j.fn, j.perr = n, pieces, fn, nil
	j.next.Store(0)
	j.helpers.Add(int32(w - 1))
	for i := 1; i < w; i++ {
		help(j.helper, i)
	}
	j.run(0)
	waitFor(&j.helpers)
	perr := j.perr
	j.fn, j.perr = nil, nil
	dynamicJobs.Put(j) // no helper touches j once waitFor has returned
	if perr != nil {
		panic(perr) // re-raised on the caller's goroutine
	}
}

// dynamicJob is what the goroutines of one Dynamic call share, kept from one call to the next
// (in dynamicJobs, with its helper method bound once) so that a call allocates nothing.
type dynamicJob struct {
	n, pieces int
	fn        func(worker, piece, lo, hi int)
	helper    func(worker int) // j.runAndDone, bound once
	next      atomic.Int64
	helpers   atomic.Int32 // helpers still taking pieces
	mu        sync.Mutex
	perr      any
}

var dynamicJobs = sync.Pool{New: func() any {
	j := &dynamicJob{}
	j.helper = j.runAndDone
	return j
}}

func (j *dynamicJob) runAndDone(worker int) {
	defer j.helpers.Add(-1)
	j.run(worker)
}

// run takes pieces until none is left, keeping a panic for the caller.
func (j *dynamicJob) run(worker int) {
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
		j.fn(worker, p, p*j.n/j.pieces, (p+1)*j.n/j.pieces)
	}
}

// DynamicWorkers is the number of goroutines Dynamic runs for n items in the given number of
// pieces, so that per-goroutine scratch space can be prepared beforehand.
func DynamicWorkers(n, pieces int) int {
	return max(1, min(Workers(), pieces, n))
}
