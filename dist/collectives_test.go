package dist

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// intData is exactly summable: integers small enough that every order of additions gives
// the same float32, so results compare exactly with the sequential reference.
func intData(r, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(((r+1)*(i+3))%17 - 8)
	}
	return x
}

// randData is not: its sums depend on the order, which is what the bit-identity check
// across ranks is about.
func randData(r, n int) []float32 {
	rng := rand.New(rand.NewPCG(uint64(r), uint64(n)))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(7)-3)))
	}
	return x
}

func gatherData(r, n int) []byte {
	if r%3 == 2 {
		return nil // some ranks send nothing
	}
	b := make([]byte, n+r*7)
	for i := range b {
		b[i] = byte(r*31 + i)
	}
	return b
}

// algorithmVariants force each algorithm onto every size, so that the ring sees tiny and
// empty chunks and recursive doubling and the tree see large buffers.
var algorithmVariants = []struct {
	name string
	opts []Option
}{
	{"default", nil},
	{"ring", []Option{WithSmallThreshold(-1), WithSegmentSize(256)}},
	{"small", []Option{WithSegmentSize(maxFrame), WithSmallThreshold(maxFrame)}},
}

// forEachJob runs check, as a subtest, on a job of every backend, algorithm variant and
// size from 1 to 5 ranks.
func forEachJob(t *testing.T, check func(t *testing.T, comms []Communicator)) {
	for _, be := range backends {
		for _, v := range algorithmVariants {
			for P := 1; P <= 5; P++ {
				t.Run(fmt.Sprintf("%s/%s/P=%d", be.name, v.name, P), func(t *testing.T) {
					check(t, be.start(t, P, v.opts...))
				})
			}
		}
	}
}

func TestCollectivesMatchReference(t *testing.T) {
	checkGoroutines(t)
	forEachJob(t, func(t *testing.T, comms []Communicator) {
		for _, n := range []int{0, 1, 1009} {
			checkAllReduce(t, comms, n)
			checkAllGather(t, comms, n)
			checkBroadcast(t, comms, n)
		}
		noErrors(t, runRanks(t, comms, 20*time.Second, func(r int, c Communicator) error { return c.Barrier() }))
	})
}

// TestCollectivesLarge covers several-MB buffers, where the ring and chain pipeline many
// frames.
func TestCollectivesLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("large buffers")
	}
	checkGoroutines(t)
	for _, be := range backends {
		for _, P := range []int{2, 3, 4} {
			t.Run(fmt.Sprintf("%s/P=%d", be.name, P), func(t *testing.T) {
				comms := be.start(t, P)
				mb := 3 << 20 // several MB
				if raceEnabled {
					mb = 600 << 10 // still many segments
				}
				checkAllReduce(t, comms, mb/4+17)
				checkAllGather(t, comms, mb*2/3+5)
				checkBroadcast(t, comms, mb+1)
			})
		}
	}
}

func checkAllReduce(t *testing.T, comms []Communicator, n int) {
	t.Helper()
	P := len(comms)
	for _, op := range []Op{Sum, Average} {
		// Exact data against the sequential reference.
		want := make([]float32, n)
		for r := range P {
			for i, x := range intData(r, n) {
				want[i] += x
			}
		}
		if op == Average {
			for i := range want {
				want[i] /= float32(P)
			}
		}
		got := make([][]float32, P)
		noErrors(t, runRanks(t, comms, 30*time.Second, func(r int, c Communicator) error {
			got[r] = intData(r, n)
			return c.AllReduce(got[r], op)
		}))
		for r := range P {
			if i := firstDiff(got[r], want); i >= 0 {
				t.Fatalf("allreduce %v n=%d rank %d: element %d = %v, want %v", op, n, r, i, got[r][i], want[i])
			}
		}

		// Order-sensitive data: close to the reference, and the same bits everywhere.
		ref := make([]float64, n)
		mag := make([]float64, n)
		for r := range P {
			for i, x := range randData(r, n) {
				ref[i] += float64(x)
				mag[i] += math.Abs(float64(x))
			}
		}
		noErrors(t, runRanks(t, comms, 30*time.Second, func(r int, c Communicator) error {
			got[r] = randData(r, n)
			return c.AllReduce(got[r], op)
		}))
		for i := range n {
			w := ref[i]
			if op == Average {
				w /= float64(P)
				mag[i] /= float64(P)
			}
			if d := math.Abs(float64(got[0][i]) - w); d > 1e-6*mag[i]*float64(P) {
				t.Fatalf("allreduce %v n=%d: element %d = %v, want %v", op, n, i, got[0][i], w)
			}
		}
		for r := 1; r < P; r++ {
			if i := firstBitDiff(got[r], got[0]); i >= 0 {
				t.Fatalf("allreduce %v n=%d: rank %d element %d is %08x, rank 0 has %08x: not bit-identical",
					op, n, r, i, math.Float32bits(got[r][i]), math.Float32bits(got[0][i]))
			}
		}
	}
}

func checkAllGather(t *testing.T, comms []Communicator, n int) {
	t.Helper()
	P := len(comms)
	got := make([][][]byte, P)
	gotF := make([][][]float32, P)
	gotI := make([][][]int32, P)
	noErrors(t, runRanks(t, comms, 30*time.Second, func(r int, c Communicator) error {
		var err error
		if got[r], err = c.AllGatherV(gatherData(r, n)); err != nil {
			return err
		}
		if gotF[r], err = AllGatherFloat32(c, intData(r, n/4+r)); err != nil {
			return err
		}
		ints := make([]int32, n%7+r)
		for i := range ints {
			ints[i] = int32(r*1000 - i)
		}
		gotI[r], err = AllGatherInt32(c, ints)
		return err
	}))
	for r := range P {
		if len(got[r]) != P || len(gotF[r]) != P || len(gotI[r]) != P {
			t.Fatalf("allgatherv n=%d rank %d: %d/%d/%d parts, want %d", n, r, len(got[r]), len(gotF[r]), len(gotI[r]), P)
		}
		for q := range P {
			if want := gatherData(q, n); !bytes.Equal(got[r][q], want) || got[r][q] == nil {
				t.Fatalf("allgatherv n=%d rank %d: part %d has %d bytes, want %d", n, r, q, len(got[r][q]), len(want))
			}
			if want := intData(q, n/4+q); !slices.Equal(gotF[r][q], want) {
				t.Fatalf("allgather float32 n=%d rank %d: part %d differs", n, r, q)
			}
			if len(gotI[r][q]) != n%7+q || (len(gotI[r][q]) > 0 && gotI[r][q][0] != int32(q*1000)) {
				t.Fatalf("allgather int32 n=%d rank %d: part %d = %v", n, r, q, gotI[r][q])
			}
		}
	}
}

func checkBroadcast(t *testing.T, comms []Communicator, n int) {
	t.Helper()
	P := len(comms)
	for root := range P {
		want := gatherData(0, n)
		for i := range want {
			want[i] ^= byte(root)
		}
		got := make([][]byte, P)
		gotF := make([][]float32, P)
		noErrors(t, runRanks(t, comms, 30*time.Second, func(r int, c Communicator) error {
			got[r] = make([]byte, len(want))
			gotF[r] = make([]float32, n/4)
			if r == root {
				copy(got[r], want)
				gotF[r] = intData(root, n/4)
			}
			if err := c.Broadcast(got[r], root); err != nil {
				return err
			}
			return BroadcastFloat32(c, gotF[r], root)
		}))
		for r := range P {
			if !bytes.Equal(got[r], want) {
				t.Fatalf("broadcast n=%d root %d: rank %d differs", n, root, r)
			}
			if !slices.Equal(gotF[r], intData(root, n/4)) {
				t.Fatalf("broadcast float32 n=%d root %d: rank %d differs", n, root, r)
			}
		}
	}
}

func firstDiff(a, b []float32) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func firstBitDiff(a, b []float32) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestDirectPlacement guards an optimisation that the results cannot show: in the copying
// phases, the reader puts most frames straight into the destination. How many frames arrive
// before their destination is known depends on scheduling, and a loaded machine can starve
// one rank, so the check gets a few attempts: a broken optimisation places none in any.
func TestDirectPlacement(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			var report []string
			for attempt := range 3 {
				report = directPlacement(t, be)
				if len(report) == 0 {
					return
				}
				t.Logf("attempt %d: %s", attempt+1, strings.Join(report, "; "))
			}
			t.Errorf("too few frames placed directly in every attempt: %s", strings.Join(report, "; "))
		})
	}
}

// directPlacement runs an allreduce, a broadcast and an allgatherv on 3 ranks and describes
// every rank that placed fewer than a sixth of its frames directly.
func directPlacement(t *testing.T, be backend) []string {
	const P = 3
	comms := be.start(t, P, WithSegmentSize(64<<10))
	noErrors(t, runRanks(t, comms, 30*time.Second, func(r int, c Communicator) error {
		if err := c.AllReduce(make([]float32, 1<<20), Sum); err != nil {
			return err
		}
		if err := c.Broadcast(make([]byte, 4<<20), 0); err != nil {
			return err
		}
		_, err := c.AllGatherV(make([]byte, 4<<20))
		return err
	}))
	var short []string
	for r, c := range comms {
		e := c.(*engine)
		frames, direct := e.stats.framesRecv.Load(), e.stats.direct.Load()
		// Allreduce: a quarter of the frames can go in place (the allgather half, less
		// what arrives before this rank has sent its part); broadcast and allgatherv:
		// nearly all.
		if direct < frames/6 {
			short = append(short, fmt.Sprintf("rank %d: %d of %d frames placed directly", r, direct, frames))
		}
	}
	return short
}
