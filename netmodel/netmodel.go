package netmodel

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
	"time"

	"github.com/ssfusion/ssfusion/dist"
)

// A Link is the alpha-beta model of a network path: a message of m bytes takes
// Alpha + m*Beta seconds.
type Link struct {
	Alpha float64 // seconds per message (start-up, latency)
	Beta  float64 // seconds per byte (inverse bandwidth)
}

// LinkFor returns the link of a cable of bitsPerSecond with the given one-way latency:
// Beta = 8/bitsPerSecond, Alpha = latency. A rate <= 0 gives a link that Check rejects.
func LinkFor(bitsPerSecond float64, latency time.Duration) Link {
	return Link{Alpha: latency.Seconds(), Beta: 8 / bitsPerSecond}
}

// NetworkPreset returns the link constants found in SAFusion's code for exactly 10e9 and
// 56e9 bits per second, and false for any other rate. They
// were fitted on 8 workers and include software overheads, which is why their Beta is
// that of a slower cable (about 9.3 and 26 Gbit/s): use LinkFor for a nominal link.
func NetworkPreset(bitsPerSecond float64) (Link, bool) {
	switch bitsPerSecond {
	case 10e9:
		return Link{Alpha: 5.2e-4, Beta: 8.6e-10}, true
	case 56e9:
		return Link{Alpha: 9.75e-5, Beta: 3.06e-10}, true
	}
	return Link{}, false
}

// An Algorithm is how a Network's AllReduce crosses the inter-node links.
type Algorithm string

const (
	// Ring is reduce-scatter then allgather around a ring: 2(P-1) messages of m/P bytes,
	// 2(P-1)*alpha + 2(P-1)/P*m*beta. Bandwidth-optimal; the zero Algorithm means Ring.
	Ring Algorithm = "ring"
	// Tree is a binary-tree reduce then a broadcast down the same tree, the whole buffer
	// at each level and no pipelining: 2*ceil(log2 P)*(alpha + m*beta).
	Tree Algorithm = "tree"
	// RecursiveDoubling exchanges the whole buffer with a partner at distance 1, 2, 4, ...:
	// log2(P) rounds of alpha + m*beta when P is a power of two. Otherwise it charges
	// floor(log2 P) + 2 rounds, as our transport does: the ranks beyond the largest power
	// of two first hand their buffers to a partner, and get the result back at the end.
	RecursiveDoubling Algorithm = "rd"
	// Ours is what our TCP transport does: RecursiveDoubling up to its small threshold
	// (Network.Small; see dist.WithSmallThreshold and dist.SmallThreshold), Ring above.
	// On a hierarchical Network it applies to the inter-node phase, whose buffer is m/G.
	Ours Algorithm = "ours"
	// Auto is the cheaper of Ring and Tree for each size, as NCCL chooses between them.
	Auto Algorithm = "auto"
)

var netAlgorithms = []Algorithm{Ring, Tree, RecursiveDoubling, Ours, Auto}

const netWant = "want ring, tree, rd, ours or auto"

// ParseAlgorithm reads an Algorithm by name, in any case; "" is Ring.
func ParseAlgorithm(s string) (Algorithm, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return Ring, nil
	}
	for _, a := range netAlgorithms {
		if t == string(a) {
			return a, nil
		}
	}
	return "", fmt.Errorf("netmodel: unknown allreduce algorithm %q (%s)", s, netWant)
}

// A Network is the cost model of a cluster's alpha-beta links: what each collective of
// size ranks costs on them. Ranks are placed PerNode to a node, in
// order (ranks 0..PerNode-1 on the first node, and so on); PerNode 0 or 1 makes the
// network flat, every rank a node of its own, and only Inter is used.
//
// Flat, the collectives cost what the algorithms of our transport cost on P ranks
// (see package dist), m being the buffer's size in bytes:
//
//	AllReduce   by AllReduceAlg (see Algorithm)
//	AllGatherV  ring: (P-1)*alpha + beta*max_r(sum(bytes) - bytes[r])
//	Broadcast   binomial tree up to 64 KiB: ceil(log2 P)*(alpha + m*beta);
//	            pipelined chain above: (P-1)*alpha + m*beta
//	Barrier     dissemination: ceil(log2 P)*alpha
//
// The allgather charges the busiest incoming link: every rank receives every block but
// its own, and the pipelined ring forwards frames as they arrive, so the rank with the
// smallest block of its own sets the pace; with all blocks of m bytes this is the usual
// (P-1)*alpha + (P-1)*m*beta. Very uneven blocks can make a real ring slower, since a
// large block holds up the small ones behind it. The chain's formula leaves out the
// pipeline's fill, a few segments (which the model does not know) per hop.
//
// With PerNode = G > 1 the collectives are hierarchical, over N = ceil(P/G) nodes:
//
//	AllReduce   ring reduce-scatter within each node, (G-1)*alpha_i + (G-1)/G*m*beta_i;
//	            G concurrent allreduces of m/G bytes across the nodes by AllReduceAlg, one
//	            for each local rank; ring allgather within each node, as the first phase
//	AllGatherV  ring allgather within each node; ring allgather of the nodes' totals
//	            between the first ranks of the nodes; broadcast (tree or chain, as above)
//	            within each node of what its first rank received
//	Broadcast   among the first ranks of the nodes (Inter), then within each node (Intra)
//	Barrier     dissemination among the ranks of each local index across the nodes, then
//	            within each node: ceil(log2 N)*alpha + ceil(log2 G)*alpha_i
//
// Each phase waits for the slowest node. Inter is the path from one rank to another node,
// not shared with the other ranks of its node (one NIC per rank, as on rail-optimised GPU
// clusters): where G ranks share one NIC, the inter-node phase of AllReduce is up to G
// times too fast. When P is not a multiple of G the last node has G' < G ranks, which
// take on the inter-node shares of the absent ones: the inter-node allreduce then moves
// ceil(G/G')*m/G bytes. When P <= G there is a single node of P ranks.
//
// Durations are computed in float64 seconds and rounded once to the nearest nanosecond;
// a duration beyond time.Duration's range is the largest one. A collective on one rank
// costs nothing, as do AllReduce and Broadcast of an empty buffer, which our transport
// skips. The methods assume that Check returns nil; on an unknown algorithm they panic.
type Network struct {
	Inter        Link      // between nodes; the only link of a flat network
	Intra        Link      // within a node, when PerNode > 1
	PerNode      int       // ranks per node; 0 or 1: flat
	AllReduceAlg Algorithm // the zero value is Ring
	// Small is our transport's small-message threshold in bytes, which Ours and the
	// broadcast follow; 0 means the transport's default, 64 KiB. dist.SmallThreshold gives
	// the one the transport picks on a shaped link.
	Small int
}

// small is the threshold Ours and Broadcast switch algorithms at.
func (n Network) small() float64 {
	if n.Small > 0 {
		return float64(n.Small)
	}
	return float64(dist.SmallThreshold(0))
}

// Check reports whether n describes a network: finite, non-negative link constants,
// a positive Beta for every link in use, PerNode >= 0 and a known algorithm.
func (n Network) Check() error {
	check := func(name string, l Link, used bool) error {
		for _, v := range []struct {
			name string
			x    float64
		}{{"Alpha", l.Alpha}, {"Beta", l.Beta}} {
			if math.IsNaN(v.x) || math.IsInf(v.x, 0) || v.x < 0 {
				return fmt.Errorf("netmodel: network: %s.%s = %v: want a finite value >= 0", name, v.name, v.x)
			}
		}
		if used && l.Beta == 0 {
			// A link of infinite bandwidth would make bandwidth-bound algorithms free
			// and every comparison between them meaningless; it is surely a forgotten field.
			return fmt.Errorf("netmodel: network: %s.Beta = 0: want the seconds per byte (see LinkFor)", name)
		}
		return nil
	}
	if err := check("Inter", n.Inter, true); err != nil {
		return err
	}
	if err := check("Intra", n.Intra, n.PerNode > 1); err != nil {
		return err
	}
	if n.PerNode < 0 {
		return fmt.Errorf("netmodel: network: PerNode = %d: want >= 0 (0 or 1: flat)", n.PerNode)
	}
	if _, err := n.alg(); err != nil {
		return err
	}
	return nil
}

// alg returns n's algorithm, Ring for the zero value.
func (n Network) alg() (Algorithm, error) {
	if n.AllReduceAlg == "" {
		return Ring, nil
	}
	a, err := ParseAlgorithm(string(n.AllReduceAlg))
	if err != nil || a != n.AllReduceAlg { // the field must be spelt exactly
		return "", fmt.Errorf("netmodel: network: unknown allreduce algorithm %q (%s)", n.AllReduceAlg, netWant)
	}
	return a, nil
}

// String describes n in a line, e.g. "flat; inter 520µs + 8.6e-10 s/B (9.30233Gbit); ring allreduce".
func (n Network) String() string {
	alg := n.AllReduceAlg
	if alg == "" {
		alg = Ring
	}
	if n.PerNode <= 1 {
		return fmt.Sprintf("flat; inter %s; %s allreduce", netLinkString(n.Inter), alg)
	}
	return fmt.Sprintf("%d ranks per node; intra %s; inter %s; %s allreduce across nodes",
		n.PerNode, netLinkString(n.Intra), netLinkString(n.Inter), alg)
}

func netLinkString(l Link) string {
	s := fmt.Sprintf("%v + %g s/B", netDuration(l.Alpha), l.Beta)
	if bw := dist.FormatBandwidth(8 / l.Beta); l.Beta > 0 && bw != "" {
		s += " (" + bw + ")"
	}
	return s
}

// netLayout returns the ranks per full node g, the number of nodes and the ranks on the
// last node for a job of size ranks.
func (n Network) netLayout(size int) (g, nodes, last int) {
	g = min(max(n.PerNode, 1), size)
	nodes = (size + g - 1) / g
	return g, nodes, size - (nodes-1)*g
}

// AllReduce is the time of an allreduce of a buffer of bytes on every one of size ranks.
func (n Network) AllReduce(size, bytes int) time.Duration {
	if size <= 1 || bytes <= 0 {
		return 0
	}
	alg, err := n.alg()
	if err != nil {
		panic(err)
	}
	g, nodes, last := n.netLayout(size)
	m := float64(bytes)
	// The intra-node phases are slowest on the largest node, a full one.
	phase := float64(g-1)*n.Intra.Alpha + float64(g-1)/float64(g)*m*n.Intra.Beta
	if g == 1 {
		phase = 0 // flat: exactly the inter-node formula, whatever Intra holds
	}
	chunk := m / float64(g) * float64((g+last-1)/last)
	return netDuration(phase + netAllReduce(alg, nodes, chunk, n.Inter, n.small()) + phase)
}

// AllGatherV is the time of an allgather in which rank r contributes bytes[r]. It panics if len(bytes) != size or a size is negative.
func (n Network) AllGatherV(size int, bytes []int) time.Duration {
	if len(bytes) != size {
		panic(fmt.Sprintf("netmodel: Network.AllGatherV: %d sizes for %d ranks", len(bytes), size))
	}
	var sum int64
	for r, b := range bytes {
		if b < 0 {
			panic(fmt.Sprintf("netmodel: Network.AllGatherV: rank %d contributes %d bytes", r, b))
		}
		sum += int64(b)
	}
	if size <= 1 {
		return 0
	}
	g, nodes, _ := n.netLayout(size)
	totals := bytes
	var within, spread float64 // the slowest node's first and last phases
	if g > 1 {
		totals = make([]int, nodes)
		for k := range nodes {
			node := bytes[k*g : min((k+1)*g, size)]
			var t int64
			for _, b := range node {
				t += int64(b)
			}
			totals[k] = int(t)
			within = max(within, netAllGather(node, t, n.Intra))
			spread = max(spread, netBroadcast(len(node), float64(sum-t), n.Intra, n.small()))
		}
	}
	return netDuration(within + netAllGather(totals, sum, n.Inter) + spread)
}

// AllToAllV is the time of a pairwise exchange in which rank r sends sent[r] bytes in all
// to the other ranks, spread evenly over them: P-1 steps, each paying a start-up and the
// largest block of the step, taken here as the largest rank's total over P-1. On a
// hierarchical network the steps to peers on other nodes run at the inter-node link's
// constants and the others at the intra-node one's. It panics if len(sent) != size or a
// size is negative.
func (n Network) AllToAllV(size int, sent []int) time.Duration {
	most := largest("AllToAllV", size, sent)
	if size <= 1 {
		return 0
	}
	g, _, _ := n.netLayout(size)
	block := float64(most) / float64(size-1)
	inter, intra := float64(size-g), float64(g-1)
	if g == 1 {
		inter, intra = float64(size-1), 0
	}
	return netDuration(inter*(n.Inter.Alpha+block*n.Inter.Beta) + intra*(n.Intra.Alpha+block*n.Intra.Beta))
}

// largest checks that every one of size ranks sends a number of bytes, none negative,
// and returns the largest; it panics, naming the method, otherwise.
func largest(method string, size int, bytes []int) int {
	if len(bytes) != size {
		panic(fmt.Sprintf("netmodel: Network.%s: %d sizes for %d ranks", method, len(bytes), size))
	}
	most := 0
	for r, b := range bytes {
		if b < 0 {
			panic(fmt.Sprintf("netmodel: Network.%s: rank %d sends %d bytes", method, r, b))
		}
		most = max(most, b)
	}
	return most
}

// SendRecv is the time of one round of a point-to-point exchange in which rank r sends
// bytes[r] to one other rank, all at once: a start-up and the largest message. The
// messages are taken to cross the inter-node link unless the job fits on one node. It
// panics if len(bytes) != size or a size is negative.
func (n Network) SendRecv(size int, bytes []int) time.Duration {
	most := largest("SendRecv", size, bytes)
	if size <= 1 {
		return 0
	}
	l := n.Inter
	if g, nodes, _ := n.netLayout(size); g > 1 && nodes == 1 {
		l = n.Intra
	}
	return netDuration(l.Alpha + float64(most)*l.Beta)
}

// Broadcast is the time of a broadcast of bytes from one rank to the size-1 others.
func (n Network) Broadcast(size, bytes int) time.Duration {
	if size <= 1 || bytes <= 0 {
		return 0
	}
	g, nodes, _ := n.netLayout(size)
	m := float64(bytes)
	return netDuration(netBroadcast(nodes, m, n.Inter, n.small()) + netBroadcast(g, m, n.Intra, n.small()))
}

// AllGather is the time of an allgather in which each of size ranks contributes a block of
// bytes: AllGatherV with equal blocks.
func (n Network) AllGather(size, bytes int) time.Duration {
	blocks := make([]int, max(size, 0))
	for r := range blocks {
		blocks[r] = bytes
	}
	return n.AllGatherV(size, blocks)
}

// Barrier is the time of a barrier of size ranks.
func (n Network) Barrier(size int) time.Duration {
	if size <= 1 {
		return 0
	}
	g, nodes, _ := n.netLayout(size)
	s := float64(netCeilLog2(nodes)) * n.Inter.Alpha
	if g > 1 {
		s += float64(netCeilLog2(g)) * n.Intra.Alpha
	}
	return netDuration(s)
}

// netAllReduce is the time in seconds of an allreduce of m bytes on p ranks over l.
func netAllReduce(alg Algorithm, p int, m float64, l Link, small float64) float64 {
	if p <= 1 {
		return 0
	}
	switch alg {
	case Ring:
		return 2*float64(p-1)*l.Alpha + 2*float64(p-1)/float64(p)*m*l.Beta
	case Tree:
		return 2 * float64(netCeilLog2(p)) * (l.Alpha + m*l.Beta)
	case RecursiveDoubling:
		rounds := bits.Len(uint(p)) - 1
		if p&(p-1) != 0 {
			rounds += 2 // the extra ranks' hand-over and the result's return
		}
		return float64(rounds) * (l.Alpha + m*l.Beta)
	case Ours:
		if m <= small {
			return netAllReduce(RecursiveDoubling, p, m, l, small)
		}
		return netAllReduce(Ring, p, m, l, small)
	case Auto:
		return min(netAllReduce(Ring, p, m, l, small), netAllReduce(Tree, p, m, l, small))
	}
	panic("netmodel: unknown allreduce algorithm " + string(alg))
}

// netAllGather is the time in seconds of a ring allgather of blocks (summing to sum) over
// l: the busiest receiver gets everything but its own block.
func netAllGather(blocks []int, sum int64, l Link) float64 {
	p := len(blocks)
	if p <= 1 {
		return 0
	}
	recv := sum - int64(blocks[0])
	for _, b := range blocks[1:] {
		recv = max(recv, sum-int64(b))
	}
	return float64(p-1)*l.Alpha + float64(recv)*l.Beta
}

// netBroadcast is the time in seconds of our transport's broadcast of m bytes on p ranks
// over l: binomial tree up to its small threshold, pipelined chain above.
func netBroadcast(p int, m float64, l Link, small float64) float64 {
	if p <= 1 || m <= 0 {
		return 0
	}
	if m <= small {
		return float64(netCeilLog2(p)) * (l.Alpha + m*l.Beta)
	}
	return float64(p-1)*l.Alpha + m*l.Beta
}

// netCeilLog2 is ceil(log2 p) for p >= 1.
func netCeilLog2(p int) int { return bits.Len(uint(p - 1)) }

// netDuration rounds seconds to the nearest nanosecond, saturating at the largest
// Duration rather than wrapping around.
func netDuration(seconds float64) time.Duration {
	ns := math.Round(seconds * 1e9)
	if !(ns < 1<<63) { // also NaN
		return math.MaxInt64
	}
	return time.Duration(ns)
}
