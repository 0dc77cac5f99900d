package parallel

import (
	"sync/atomic"
	"testing"
)

// TestDynamicCoversEveryPieceOnce checks Dynamic's ranges and worker indices.
func TestDynamicCoversEveryPieceOnce(t *testing.T) {
	for _, c := range []struct{ n, pieces int }{{0, 4}, {1, 8}, {5, 8}, {32, 8}, {33, 7}, {1000, 3}} {
		seen := make([]atomic.Int32, c.n)
		pieces := make([]atomic.Int32, c.pieces)
		w := DynamicWorkers(c.n, c.pieces)
		Dynamic(c.n, c.pieces, func(worker, piece, lo, hi int) {
			if worker < 0 || worker >= w {
				t.Errorf("n=%d: worker %d of %d", c.n, worker, w)
			}
			pieces[piece].Add(1)
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		})
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Errorf("n=%d pieces=%d: element %d seen %d times", c.n, c.pieces, i, seen[i].Load())
			}
		}
		for p := range min(c.n, c.pieces) {
			if pieces[p].Load() != 1 {
				t.Errorf("n=%d pieces=%d: piece %d run %d times", c.n, c.pieces, p, pieces[p].Load())
			}
		}
	}
}
