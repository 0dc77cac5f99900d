package netmodel

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/dist"
)

var (
	tenGbit    = Link{Alpha: 5.2e-4, Beta: 8.6e-10}
	hundredGig = Link{Alpha: 5e-6, Beta: 8e-11} // LinkFor(100e9, 5µs)
)

// netSec converts seconds the way the model does, so that formulas compare exactly.
func netSec(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

// netNear reports whether a and b differ by at most 1 ns: formulas that sum the same
// terms in another order may round differently.
func netNear(a, b time.Duration) bool { return a-b <= 1 && b-a <= 1 }

func netEqual(size, m int) []int {
	b := make([]int, size)
	for i := range b {
		b[i] = m
	}
	return b
}

func TestNetworkRingAllReduce(t *testing.T) {
	n := Network{Inter: tenGbit}
	a, b := tenGbit.Alpha, tenGbit.Beta
	for _, P := range []int{2, 3, 4, 7, 8, 16, 64, 1000} {
		for _, m := range []int{4, 4096, 64 << 10, 1e6, 100 << 20} {
			want := netSec(2*float64(P-1)*a + 2*float64(P-1)/float64(P)*float64(m)*b)
			if got := n.AllReduce(P, m); got != want {
				t.Errorf("ring AllReduce(%d, %d) = %v, want %v", P, m, got, want)
			}
		}
	}
	// Worked by hand: 2*7*5.2e-4 + 2*7/8*1e6*8.6e-10 = 7.28 ms + 1.505 ms.
	if got, want := n.AllReduce(8, 1e6), 8785*time.Microsecond; got != want {
		t.Errorf("ring AllReduce(8, 1e6) = %v, want %v", got, want)
	}
	if got := (Network{Inter: tenGbit, AllReduceAlg: Ring}).AllReduce(8, 1e6); got != n.AllReduce(8, 1e6) {
		t.Errorf("Ring %v differs from the zero algorithm %v", got, n.AllReduce(8, 1e6))
	}
}

func TestNetworkAllGatherV(t *testing.T) {
	n := Network{Inter: tenGbit}
	a, b := tenGbit.Alpha, tenGbit.Beta
	for _, P := range []int{2, 3, 8, 33} {
		for _, m := range []int{0, 1, 1000, 1 << 20} {
			want := netSec(float64(P-1)*a + float64(P-1)*float64(m)*b)
			if got := n.AllGatherV(P, netEqual(P, m)); got != want {
				t.Errorf("AllGatherV(%d, %d each) = %v, want %v", P, m, got, want)
			}
		}
	}
	if got, want := n.AllGatherV(8, netEqual(8, 1e5)), 4242*time.Microsecond; got != want {
		t.Errorf("AllGatherV(8, 1e5 each) = %v, want %v", got, want)
	}
	for _, c := range []struct {
		bytes []int
		recv  int // what the busiest receiver gets
	}{
		{[]int{100, 200, 300}, 500},
		{[]int{300, 200, 100}, 500},
		{[]int{0, 1000, 0, 0}, 1000},
		{[]int{5, 0}, 5},
	} {
		P := len(c.bytes)
		want := netSec(float64(P-1)*a + float64(c.recv)*b)
		if got := n.AllGatherV(P, c.bytes); got != want {
			t.Errorf("AllGatherV(%v) = %v, want %v", c.bytes, got, want)
		}
	}
}

// TestNetworkAllToAllV: P-1 steps, each a start-up and a P-1-th of the busiest sender's
// bytes; on nodes, the steps within a node run on the intra-node link.
func TestNetworkAllToAllV(t *testing.T) {
	a, b := tenGbit.Alpha, tenGbit.Beta
	flat := Network{Inter: tenGbit}
	for _, c := range []struct {
		sent []int
		most int
	}{
		{[]int{0, 0}, 0},
		{[]int{300, 600, 0}, 600},
		{[]int{7000, 7000, 7000, 7000, 7000, 7000, 7000, 7000}, 7000},
	} {
		P := len(c.sent)
		want := netSec(float64(P-1)*a + float64(c.most)*b)
		if got := flat.AllToAllV(P, c.sent); !netNear(got, want) {
			t.Errorf("AllToAllV(%v) = %v, want %v", c.sent, got, want)
		}
	}
	if got := flat.AllToAllV(1, []int{100}); got != 0 {
		t.Errorf("AllToAllV on one rank = %v, want 0", got)
	}
	// 8 ranks, 4 per node: 4 of the 7 steps cross nodes, 3 stay within one.
	intra := Link{Alpha: 1e-6, Beta: 1e-11}
	nodes := Network{Inter: tenGbit, Intra: intra, PerNode: 4}
	block := 7000.0 / 7
	want := netSec(4*(a+block*b) + 3*(intra.Alpha+block*intra.Beta))
	if got := nodes.AllToAllV(8, netEqual(8, 7000)); !netNear(got, want) {
		t.Errorf("hierarchical AllToAllV = %v, want %v", got, want)
	}
	for _, bad := range [][]int{{1, 2}, {1, -1, 0}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("AllToAllV(3, %v) did not panic", bad)
				}
			}()
			flat.AllToAllV(3, bad)
		}()
	}
}

func TestNetworkSendRecv(t *testing.T) {
	a, b := tenGbit.Alpha, tenGbit.Beta
	intra := Link{Alpha: 1e-6, Beta: 1e-11}
	for _, c := range []struct {
		n     Network
		size  int
		bytes []int
		want  time.Duration
	}{
		{Network{Inter: tenGbit}, 3, []int{10, 5000, 0}, netSec(a + 5000*b)},
		{Network{Inter: tenGbit}, 1, []int{10}, 0},
		{Network{Inter: tenGbit, Intra: intra, PerNode: 4}, 4, []int{1, 2, 3, 4000}, netSec(intra.Alpha + 4000*intra.Beta)},
		{Network{Inter: tenGbit, Intra: intra, PerNode: 4}, 8, netEqual(8, 4000), netSec(a + 4000*b)},
	} {
		if got := c.n.SendRecv(c.size, c.bytes); !netNear(got, c.want) {
			t.Errorf("%v: SendRecv(%d, %v) = %v, want %v", c.n, c.size, c.bytes, got, c.want)
		}
	}
}

func TestNetworkAllGatherVPanics(t *testing.T) {
	for _, c := range []struct {
		size  int
		bytes []int
	}{{3, []int{1, 2}}, {2, []int{1, -1}}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("AllGatherV(%d, %v) did not panic", c.size, c.bytes)
				}
			}()
			Network{Inter: tenGbit}.AllGatherV(c.size, c.bytes)
		}()
	}
}

func TestNetworkAlgorithms(t *testing.T) {
	l := tenGbit
	for _, c := range []struct {
		alg    Algorithm
		P, m   int
		rounds int // of alpha + m*beta
	}{
		{Tree, 2, 1000, 2},
		{Tree, 3, 1000, 4},
		{Tree, 5, 1000, 6},
		{Tree, 8, 1000, 6},
		{Tree, 9, 1 << 20, 8},
		{RecursiveDoubling, 2, 1000, 1},
		{RecursiveDoubling, 3, 1000, 3},
		{RecursiveDoubling, 6, 1000, 4},
		{RecursiveDoubling, 8, 1000, 3},
		{RecursiveDoubling, 12, 1 << 20, 5},
		{RecursiveDoubling, 16, 1 << 20, 4},
	} {
		n := Network{Inter: l, AllReduceAlg: c.alg}
		want := netSec(float64(c.rounds) * (l.Alpha + float64(c.m)*l.Beta))
		if got := n.AllReduce(c.P, c.m); got != want {
			t.Errorf("%s AllReduce(%d, %d) = %v, want %v", c.alg, c.P, c.m, got, want)
		}
	}
	// By hand: 6 * (5.2e-4 + 1000*8.6e-10) and 4 * the same.
	if got, want := (Network{Inter: l, AllReduceAlg: Tree}).AllReduce(5, 1000), 3125160*time.Nanosecond; got != want {
		t.Errorf("tree AllReduce(5, 1000) = %v, want %v", got, want)
	}
	if got, want := (Network{Inter: l, AllReduceAlg: RecursiveDoubling}).AllReduce(6, 1000), 2083440*time.Nanosecond; got != want {
		t.Errorf("rd AllReduce(6, 1000) = %v, want %v", got, want)
	}
}

func TestNetworkOursThreshold(t *testing.T) {
	ours := Network{Inter: tenGbit, AllReduceAlg: Ours}
	rd := Network{Inter: tenGbit, AllReduceAlg: RecursiveDoubling}
	ring := Network{Inter: tenGbit, AllReduceAlg: Ring}
	for _, P := range []int{2, 5, 8, 64} {
		for _, m := range []int{4, 4096, 64<<10 - 4, 64 << 10} {
			if got, want := ours.AllReduce(P, m), rd.AllReduce(P, m); got != want {
				t.Errorf("ours AllReduce(%d, %d) = %v, want recursive doubling's %v", P, m, got, want)
			}
		}
		for _, m := range []int{64<<10 + 4, 1 << 20, 100 << 20} {
			if got, want := ours.AllReduce(P, m), ring.AllReduce(P, m); got != want {
				t.Errorf("ours AllReduce(%d, %d) = %v, want ring's %v", P, m, got, want)
			}
		}
		// The switch must be visible, or the cases above prove nothing.
		if P > 2 && rd.AllReduce(P, 64<<10+4) == ring.AllReduce(P, 64<<10+4) {
			t.Errorf("P=%d: rd and ring agree at the threshold", P)
		}
	}
	if small := dist.SmallThreshold(0); small != 64<<10 {
		t.Errorf("the transport's threshold is %d, the documentation says 64 KiB", small)
	}
}

func TestNetworkAuto(t *testing.T) {
	for _, l := range []Link{tenGbit, {Alpha: 9.75e-5, Beta: 3.06e-10}, hundredGig} {
		auto := Network{Inter: l, AllReduceAlg: Auto}
		ring := Network{Inter: l, AllReduceAlg: Ring}
		tree := Network{Inter: l, AllReduceAlg: Tree}
		for _, P := range []int{2, 3, 8, 64} {
			for m := 1; m <= 1<<30; m *= 4 {
				if got, want := auto.AllReduce(P, m), min(ring.AllReduce(P, m), tree.AllReduce(P, m)); got != want {
					t.Errorf("%v: auto AllReduce(%d, %d) = %v, want %v", l, P, m, got, want)
				}
			}
		}
	}
	// Both choices are taken: latency decides small buffers, bandwidth large ones.
	auto := Network{Inter: tenGbit, AllReduceAlg: Auto}
	if got, want := auto.AllReduce(8, 4), (Network{Inter: tenGbit, AllReduceAlg: Tree}).AllReduce(8, 4); got != want {
		t.Errorf("auto AllReduce(8, 4) = %v, want tree's %v", got, want)
	}
	if got, want := auto.AllReduce(8, 100<<20), (Network{Inter: tenGbit}).AllReduce(8, 100<<20); got != want {
		t.Errorf("auto AllReduce(8, 100 MiB) = %v, want ring's %v", got, want)
	}
}

func TestNetworkBroadcastBarrier(t *testing.T) {
	n := Network{Inter: tenGbit}
	a, b := tenGbit.Alpha, tenGbit.Beta
	for _, c := range []struct {
		P, m int
		want time.Duration
	}{
		{8, 1000, netSec(3 * (a + 1000*b))},
		{5, 64 << 10, netSec(3 * (a + 65536*b))}, // the tree up to and including 64 KiB
		{5, 64<<10 + 1, netSec(4*a + 65537*b)},   // the chain above
		{8, 1e6, 4500 * time.Microsecond},        // 7*5.2e-4 + 1e6*8.6e-10
		{2, 1e6, netSec(a + 1e6*b)},
	} {
		if got := n.Broadcast(c.P, c.m); got != c.want {
			t.Errorf("Broadcast(%d, %d) = %v, want %v", c.P, c.m, got, c.want)
		}
	}
	for _, c := range []struct {
		P, rounds int
	}{{2, 1}, {3, 2}, {4, 2}, {8, 3}, {9, 4}, {1000, 10}} {
		if got, want := n.Barrier(c.P), netSec(float64(c.rounds)*a); got != want {
			t.Errorf("Barrier(%d) = %v, want %v", c.P, got, want)
		}
	}
}

func TestNetworkSizeOneIsFree(t *testing.T) {
	for _, n := range []Network{
		{Inter: tenGbit},
		{Inter: tenGbit, Intra: hundredGig, PerNode: 4},
	} {
		for _, alg := range netAlgorithms {
			n.AllReduceAlg = alg
			for _, m := range []int{0, 4, 1 << 20} {
				if d := n.AllReduce(1, m); d != 0 {
					t.Errorf("%v: AllReduce(1, %d) = %v", n, m, d)
				}
				if d := n.Broadcast(1, m); d != 0 {
					t.Errorf("%v: Broadcast(1, %d) = %v", n, m, d)
				}
				if d := n.AllGatherV(1, []int{m}); d != 0 {
					t.Errorf("%v: AllGatherV(1, %d) = %v", n, m, d)
				}
				// Empty buffers: our transport returns at once.
				if d := n.AllReduce(8, 0); d != 0 {
					t.Errorf("%v: AllReduce(8, 0) = %v", n, d)
				}
				if d := n.Broadcast(8, 0); d != 0 {
					t.Errorf("%v: Broadcast(8, 0) = %v", n, d)
				}
			}
			if d := n.Barrier(1); d != 0 {
				t.Errorf("%v: Barrier(1) = %v", n, d)
			}
		}
	}
}

func TestNetworkOneRankPerNodeIsFlat(t *testing.T) {
	// PerNode 1 (or 0) ignores Intra, however absurd.
	for _, alg := range netAlgorithms {
		flat := Network{Inter: tenGbit, AllReduceAlg: alg}
		one := Network{Inter: tenGbit, Intra: Link{Alpha: 3, Beta: 1}, PerNode: 1, AllReduceAlg: alg}
		for _, P := range []int{2, 3, 8, 17} {
			if got, want := one.Barrier(P), flat.Barrier(P); got != want {
				t.Errorf("%s: Barrier(%d) = %v with PerNode 1, %v flat", alg, P, got, want)
			}
			for _, m := range []int{4, 64 << 10, 1 << 20} {
				if got, want := one.AllReduce(P, m), flat.AllReduce(P, m); got != want {
					t.Errorf("%s: AllReduce(%d, %d) = %v with PerNode 1, %v flat", alg, P, m, got, want)
				}
				if got, want := one.Broadcast(P, m), flat.Broadcast(P, m); got != want {
					t.Errorf("%s: Broadcast(%d, %d) = %v with PerNode 1, %v flat", alg, P, m, got, want)
				}
				if got, want := one.AllGatherV(P, netEqual(P, m)), flat.AllGatherV(P, netEqual(P, m)); got != want {
					t.Errorf("%s: AllGatherV(%d, %d) = %v with PerNode 1, %v flat", alg, P, m, got, want)
				}
			}
		}
	}
}

func TestNetworkHierarchical(t *testing.T) {
	n := Network{Inter: tenGbit, Intra: hundredGig, PerNode: 4}
	for _, c := range []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		// 2 * (3*5e-6 + 3/4*8e6*8e-11) + (2*5.2e-4 + 2e6*8.6e-10): 2 * 0.495 ms + 2.76 ms.
		{"AllReduce(8, 8e6)", n.AllReduce(8, 8e6), 3750 * time.Microsecond},
		// The last node has 2 ranks, each of which carries 2 of the 4 inter-node shares:
		// 2 * 0.495 ms + (2*5.2e-4 + 4e6*8.6e-10).
		{"AllReduce(6, 8e6)", n.AllReduce(6, 8e6), 5470 * time.Microsecond},
		// Within the node (3*5e-6 + 3e6*8e-11), between the nodes (5.2e-4 + 4e6*8.6e-10),
		// chain broadcast of the other node's 4e6 bytes (3*5e-6 + 4e6*8e-11).
		{"AllGatherV(8, 1e6 each)", n.AllGatherV(8, netEqual(8, 1e6)), 4550 * time.Microsecond},
		// 2 and 3 rounds of Inter on 3 and 5 nodes, 2 of Intra.
		{"Barrier(12)", n.Barrier(12), netSec(2*5.2e-4 + 2*5e-6)},
		{"Barrier(20)", n.Barrier(20), netSec(3*5.2e-4 + 2*5e-6)},
		// Chains between 2 nodes, then within 4 ranks.
		{"Broadcast(8, 1e6)", n.Broadcast(8, 1e6), netSec(5.2e-4 + 1e6*8.6e-10 + 3*5e-6 + 1e6*8e-11)},
		// One node: all intra.
		{"Broadcast(3, 1e6)", n.Broadcast(3, 1e6), netSec(2*5e-6 + 1e6*8e-11)},
		{"Barrier(3)", n.Barrier(3), netSec(2 * 5e-6)},
	} {
		if !netNear(c.got, c.want) {
			t.Errorf("%v: %s = %v, want %v", n, c.name, c.got, c.want)
		}
	}

	// Uneven blocks, node totals 10 and 1000: each phase is paced by its slowest node.
	blocks := []int{0, 0, 5, 5, 1000, 0, 0, 0}
	within := 3*5e-6 + 1000*8e-11     // node 1: a rank with 0 bytes receives 1000
	between := 5.2e-4 + 1000*8.6e-10  // node 0's first rank receives node 1's 1000
	spread := 2 * (5e-6 + 1000*8e-11) // node 0 broadcasts those 1000 bytes by tree
	if got, want := n.AllGatherV(8, blocks), netSec(within+between+spread); !netNear(got, want) {
		t.Errorf("AllGatherV(%v) = %v, want %v", blocks, got, want)
	}

	// With one node, the hierarchical allreduce is a ring over Intra, whatever the
	// algorithm between nodes.
	for _, alg := range netAlgorithms {
		h := Network{Inter: tenGbit, Intra: hundredGig, PerNode: 8, AllReduceAlg: alg}
		for _, P := range []int{2, 5, 8} {
			want := (Network{Inter: hundredGig}).AllReduce(P, 1<<20)
			if got := h.AllReduce(P, 1<<20); !netNear(got, want) {
				t.Errorf("%v: AllReduce(%d, 1 MiB) = %v, want ring over Intra %v", h, P, got, want)
			}
		}
	}
}

// With the same link within and between nodes, the hierarchical ring allreduce moves as
// many bytes per rank as the flat ring ((G-1)/G + (N-1)/(NG) = (NG-1)/(NG)) in fewer
// steps (G+N-2 <= NG-1), so it is never slower, and exactly as fast when Alpha is 0. A
// link within nodes that is faster in both constants makes it strictly faster. The hierarchical allgather funnels
// every node's data through one rank, so with equal links and no latency it is never
// faster than the flat ring.
func TestNetworkHierarchyProperties(t *testing.T) {
	for _, l := range []Link{tenGbit, {Alpha: 0, Beta: 8.6e-10}} {
		flat := Network{Inter: l}
		for _, G := range []int{2, 4, 8} {
			same := Network{Inter: l, Intra: l, PerNode: G}
			fast := Network{Inter: l, Intra: Link{Alpha: l.Alpha / 10, Beta: l.Beta / 10}, PerNode: G}
			for _, N := range []int{2, 3, 16} {
				P := N * G
				for _, m := range []int{1 << 10, 1 << 20, 100 << 20} {
					h, f := same.AllReduce(P, m), flat.AllReduce(P, m)
					if h > f || l.Alpha == 0 && !netNear(h, f) {
						t.Errorf("%v: AllReduce(%d, %d) = %v, flat %v", same, P, m, h, f)
					}
					if hf := fast.AllReduce(P, m); hf >= h {
						t.Errorf("%v: AllReduce(%d, %d) = %v, not below %v with equal links", fast, P, m, hf, h)
					}
					if l.Alpha == 0 {
						h, f := same.AllGatherV(P, netEqual(P, m)), flat.AllGatherV(P, netEqual(P, m))
						if h <= f {
							t.Errorf("%v: AllGatherV(%d, %d each) = %v, flat %v", same, P, m, h, f)
						}
					}
				}
			}
		}
	}
}

func TestNetworkCheck(t *testing.T) {
	for _, c := range []struct {
		n    Network
		want string // "" for no error, else a part of the message
	}{
		{Network{Inter: tenGbit}, ""},
		{Network{Inter: tenGbit, PerNode: 1}, ""},
		{Network{Inter: tenGbit, Intra: hundredGig, PerNode: 8, AllReduceAlg: Auto}, ""},
		{Network{Inter: Link{Beta: 1e-9}, AllReduceAlg: "rd"}, ""},
		{Network{}, "Inter.Beta = 0"},
		{Network{Inter: Link{Alpha: -1, Beta: 1e-9}}, "Inter.Alpha = -1"},
		{Network{Inter: Link{Alpha: math.NaN(), Beta: 1e-9}}, "Inter.Alpha = NaN"},
		{Network{Inter: Link{Beta: math.Inf(1)}}, "Inter.Beta = +Inf"},
		{Network{Inter: LinkFor(0, 0)}, "Inter.Beta = +Inf"},
		{Network{Inter: tenGbit, PerNode: 4}, "Intra.Beta = 0"},
		{Network{Inter: tenGbit, Intra: Link{Beta: -1}}, "Intra.Beta = -1"},
		{Network{Inter: tenGbit, PerNode: -1}, "PerNode = -1"},
		{Network{Inter: tenGbit, AllReduceAlg: "Ring"}, `"Ring"`},
		{Network{Inter: tenGbit, AllReduceAlg: "butterfly"}, "want ring, tree, rd, ours or auto"},
	} {
		err := c.n.Check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%#v: Check() = %v", c.n, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%#v: Check() = %v, want an error with %q", c.n, err, c.want)
		}
	}
}

func TestNetworkUnknownAlgorithmPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("AllReduce with an unknown algorithm did not panic")
		}
	}()
	Network{Inter: tenGbit, AllReduceAlg: "butterfly"}.AllReduce(4, 1000)
}

func TestParseAlgorithm(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Algorithm
	}{
		{"ring", Ring}, {"tree", Tree}, {"rd", RecursiveDoubling}, {"ours", Ours}, {"auto", Auto},
		{" Auto ", Auto}, {"RD", RecursiveDoubling}, {"", Ring},
	} {
		if got, err := ParseAlgorithm(c.in); err != nil || got != c.want {
			t.Errorf("ParseAlgorithm(%q) = %q, %v, want %q", c.in, got, err, c.want)
		}
	}
	for _, a := range netAlgorithms {
		if got, err := ParseAlgorithm(string(a)); err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q) = %q, %v", a, got, err)
		}
	}
	for _, in := range []string{"rings", "nccl", "recursive doubling", "r d"} {
		got, err := ParseAlgorithm(in)
		if err == nil {
			t.Errorf("ParseAlgorithm(%q) = %q, want an error", in, got)
			continue
		}
		for _, name := range []string{"ring", "tree", "rd", "ours", "auto", in} {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("ParseAlgorithm(%q): %v does not mention %q", in, err, name)
			}
		}
	}
}

func TestNetworkPreset(t *testing.T) {
	for _, c := range []struct {
		bps  float64
		want Link
		ok   bool
	}{
		{10e9, Link{Alpha: 5.2e-4, Beta: 8.6e-10}, true},
		{56e9, Link{Alpha: 9.75e-5, Beta: 3.06e-10}, true},
		{1e10, Link{Alpha: 5.2e-4, Beta: 8.6e-10}, true},
		{25e9, Link{}, false},
		{10e9 + 1, Link{}, false},
		{0, Link{}, false},
	} {
		if got, ok := NetworkPreset(c.bps); got != c.want || ok != c.ok {
			t.Errorf("NetworkPreset(%g) = %v, %v, want %v, %v", c.bps, got, ok, c.want, c.ok)
		}
	}
}

func TestNetworkLinkFor(t *testing.T) {
	if got, want := LinkFor(10e9, 50*time.Microsecond), (Link{Alpha: 5e-5, Beta: 8e-10}); got != want {
		t.Errorf("LinkFor(10 Gbit, 50µs) = %v, want %v", got, want)
	}
	if got, want := LinkFor(100e9, 5*time.Microsecond), hundredGig; got != want {
		t.Errorf("LinkFor(100 Gbit, 5µs) = %v, want %v", got, want)
	}
	// A link of 8 bit/s moves a byte a second.
	if got := (Network{Inter: LinkFor(8, 0)}).Broadcast(2, 3); got != 3*time.Second {
		t.Errorf("Broadcast of 3 bytes at 8 bit/s = %v, want 3s", got)
	}
}

func TestNetworkString(t *testing.T) {
	for _, c := range []struct {
		n    Network
		want []string
	}{
		{Network{Inter: tenGbit}, []string{"flat", "520µs", "8.6e-10 s/B", "9.30233Gbit", "ring allreduce"}},
		{Network{Inter: LinkFor(56e9, 0), Intra: hundredGig, PerNode: 8, AllReduceAlg: Auto},
			[]string{"8 ranks per node", "intra 5µs", "100Gbit", "inter 0s", "56Gbit", "auto allreduce"}},
	} {
		s := c.n.String()
		for _, w := range c.want {
			if !strings.Contains(s, w) {
				t.Errorf("%#v.String() = %q, missing %q", c.n, s, w)
			}
		}
	}
}

func TestNetworkSaturates(t *testing.T) {
	n := Network{Inter: Link{Alpha: 1, Beta: 1e3}}
	if got := n.Broadcast(2, math.MaxInt); got != math.MaxInt64 {
		t.Errorf("Broadcast of MaxInt bytes at 1 ms/B = %v, want the largest Duration", got)
	}
	if got := n.AllReduce(1<<20, math.MaxInt); got != math.MaxInt64 {
		t.Errorf("AllReduce of MaxInt bytes at 1 ms/B = %v, want the largest Duration", got)
	}
}

// TestOursFollowsItsThreshold: Ours switches from recursive doubling to ring at the
// small-message threshold it is given.
func TestOursFollowsItsThreshold(t *testing.T) {
	link := Link{Alpha: 1e-4, Beta: 1e-9}
	n := Network{Inter: link, AllReduceAlg: Ours, Small: 16 << 10}
	rd := Network{Inter: link, AllReduceAlg: RecursiveDoubling}
	ring := Network{Inter: link, AllReduceAlg: Ring}
	if n.AllReduce(4, 16<<10) != rd.AllReduce(4, 16<<10) || n.AllReduce(4, 16<<10+4) != ring.AllReduce(4, 16<<10+4) {
		t.Errorf("Ours with a 16 KiB threshold does not switch from recursive doubling to ring there")
	}
}

// TestNetworkAllGather: equal blocks cost what AllGatherV charges for them, on a flat ring
// the usual (P-1)*alpha + (P-1)*m*beta.
func TestNetworkAllGather(t *testing.T) {
	flat := Network{Inter: tenGbit}
	hier := Network{Inter: tenGbit, Intra: hundredGig, PerNode: 4}
	for _, P := range []int{1, 2, 3, 8, 10} {
		for _, m := range []int{0, 8, 4096, 1 << 20} {
			want := netSec(float64(P-1)*tenGbit.Alpha + float64(P-1)*float64(m)*tenGbit.Beta)
			if got := flat.AllGather(P, m); !netNear(got, want) {
				t.Errorf("flat AllGather(%d, %d) = %v, want %v", P, m, got, want)
			}
			if got, want := hier.AllGather(P, m), hier.AllGatherV(P, netEqual(P, m)); got != want {
				t.Errorf("hierarchical AllGather(%d, %d) = %v, AllGatherV of equal blocks %v", P, m, got, want)
			}
		}
	}
}

func TestParseCable(t *testing.T) {
	for _, tc := range []struct {
		bandwidth, latency string
		want               Cable
		bad                string
	}{
		{"", "", Cable{}, ""},
		{"60Mbit", "", Cable{BitsPerSecond: 60e6}, ""},
		{"10Gbit", "100us", Cable{BitsPerSecond: 10e9, Latency: 100 * time.Microsecond}, ""},
		{"", "2ms", Cable{Latency: 2 * time.Millisecond}, ""},
		{"fast", "", Cable{}, "fast"},
		{"1Gbit", "soon", Cable{}, "soon"},
		{"1Gbit", "-1ms", Cable{}, "-1ms"},
	} {
		got, err := ParseCable(tc.bandwidth, tc.latency)
		switch {
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("ParseCable(%q, %q): error %v, want one naming %q", tc.bandwidth, tc.latency, err, tc.bad)
		case tc.bad == "" && (err != nil || got != tc.want):
			t.Errorf("ParseCable(%q, %q) = %+v, %v; want %+v", tc.bandwidth, tc.latency, got, err, tc.want)
		}
	}
	c := Cable{BitsPerSecond: 60e6, Latency: time.Millisecond}
	if !c.Shaped() || (Cable{}).Shaped() {
		t.Errorf("Shaped: %v for %+v, %v for an unshaped cable", c.Shaped(), c, (Cable{}).Shaped())
	}
	want := Network{Inter: LinkFor(60e6, time.Millisecond), AllReduceAlg: Ours, Small: 16 << 10}
	if got := c.Network(); got != want {
		t.Errorf("%+v.Network() = %+v, want %+v", c, got, want)
	}
	if err := (Cable{}).Network().Check(); err == nil {
		t.Errorf("an unshaped cable's network passes Check")
	}
}
