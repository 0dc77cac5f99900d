package dist

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// TestGatherer checks the fallback of a Gatherer on a communicator that cannot gather
// into its buffer (shared memory's own case is TestShmGatherer).
func TestGatherer(t *testing.T) {
	testGatherer(t, startInProc(t, 3), false)
}

// testGatherer checks a Gatherer's results against every rank's data through a sequence
// of sizes that differ between ranks (single-step and many-step gathers on shared
// memory), that the kept buffer is reused when it is large enough if reuses, and a last
// call in which every rank sends the next rank's block of the previous result, so that
// the blocks move within the kept buffer.
func testGatherer(t *testing.T, comms []Communicator, reuses bool) {
	t.Helper()
	noErrors(t, runRanks(t, comms, 20*time.Second, func(r int, c Communicator) error {
		g := NewGatherer(c)
		var got [][]byte
		check := func(call string, want [][]byte) error {
			for q := range want {
				if !bytes.Equal(got[q], want[q]) {
					return fmt.Errorf("%s: block %d differs", call, q)
				}
				if cap(got[q]) != len(got[q]) {
					return fmt.Errorf("%s: block %d has capacity %d beyond its %d bytes", call, q, cap(got[q]), len(got[q]))
				}
			}
			return nil
		}
		var first *byte
		size := func(base, q int) int { return base + min(base, 37*q) }
		for i, n := range []int{1000, 5, 0, 700} {
			var err error
			if got, err = g.AllGatherV(gatherData(r+i, size(n, r))); err != nil {
				return err
			}
			want := make([][]byte, len(comms))
			for q := range want {
				want[q] = gatherData(q+i, size(n, q))
			}
			if err := check(fmt.Sprintf("call %d, %d bytes", i, n), want); err != nil {
				return err
			}
			if i == 0 {
				first = unsafe.SliceData(got[0])
			} else if reuses && n > 0 && unsafe.SliceData(got[0]) != first {
				return fmt.Errorf("call %d, %d bytes: not gathered into the kept buffer", i, n)
			}
		}
		next := func(q int) int { return (q + 1) % len(got) }
		want := make([][]byte, len(got))
		for q := range got {
			want[q] = slices.Clone(got[next(q)])
		}
		var err error
		if got, err = g.AllGatherV(got[next(r)]); err != nil {
			return err
		}
		return check("send from the last result", want)
	}))
}
