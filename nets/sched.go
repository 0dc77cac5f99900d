package nets

import (
	"sync"
	"sync/atomic"
)

// dynamic runs fn over [0, n) cut into pieces contiguous ranges (fewer when n is smaller), which
// min(workers(), pieces) goroutines, the caller's among them, take one after another as they
// finish the previous one. worker (below the number of goroutines) names the goroutine, for
// per-goroutine scratch space; piece names the range, for results that must not depend on which
// goroutine ran it. On a machine shared with other processes one core often runs at a fraction of
// the other's speed, and parallel's fixed halves then wait for the slower one; here the faster
// core takes more pieces.
func dynamic(n, pieces int, fn func(worker, piece, lo, hi int)) {
	pieces = min(pieces, n)
	if pieces <= 0 {
		return
	}
	w := min(workers(), pieces)
	if w == 1 {
		for p := 0; p < pieces; p++ {
			fn(0, p, p*n/pieces, (p+1)*n/pieces)
		}
		return
	}
	j := &dynamicJob{n: n, pieces: pieces, fn: fn}
	j.wg.Add(w - 1)
	for i := 1; i < w; i++ {
		go j.runAndDone(i)
	}
	j.run(0)
	j.wg.Wait()
	if j.perr != nil {
		panic(j.perr) // re-raised on the op's goroutine, where guard turns it into an error
	}
}

// dynamicJob is what the goroutines of one dynamic call share: one allocation per call, where
// closures over the same variables took one per variable and goroutine.
type dynamicJob struct {
	n, pieces int
	fn        func(worker, piece, lo, hi int)
	next      atomic.Int64
	wg        sync.WaitGroup
	mu        sync.Mutex
	perr      any
}

func (j *dynamicJob) runAndDone(worker int) {
	defer j.wg.Done()
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

// dynamicWorkers is the number of goroutines dynamic runs for the given number of pieces, so that
// per-goroutine scratch space can be prepared beforehand.
func dynamicWorkers(n, pieces int) int {
	return max(1, min(workers(), pieces, n))
}

// elementPieces is the number of pieces for dynamic over n elements of an element-wise pass:
// 32 Ki elements each, enough work to outweigh taking a piece.
func elementPieces(n int) int { return max(1, n>>15) }
