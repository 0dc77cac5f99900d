//go:build mpi

package mpi

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/engine"
)

// mpiDesc is what a rank contributes to the descriptor exchange that opens each
// collective of the MPI backend: what it issued, and whether an argument was invalid.
// Every rank receives every rank's descriptor and draws the same conclusions from them,
// so a mismatch or a bad argument fails the collective on every rank, and no rank
// starts an MPI collective that the others would not match.
type mpiDesc struct {
	code    int64 // engine.CollKind | dist.Op<<8
	length  int64 // allreduce: floats; broadcast, allgatherv, alltoallv: bytes sent; barrier: 0
	root    int64 // broadcast root; the number of blocks of an alltoallv that has the wrong number
	invalid int64 // an invalidReason, 0 if the arguments are fine
}

// descWords is the size of an mpiDesc in int64s, as it travels. The descriptor is
// followed on the wire by one word per rank: the sizes of an alltoallv's blocks, zero for
// the other kinds. Every kind carries them, so that ranks that issued different kinds
// still exchange descriptors of one size and learn of the mismatch.
const descWords = 4

// descWidth is the number of int64s a rank contributes to a descriptor exchange.
func descWidth(size int) int { return descWords + size }

// maxCount is the largest count an MPI call takes (a C int).
const maxCount = math.MaxInt32

type invalidReason int64

const (
	validArgs invalidReason = iota
	invalidOp
	invalidRoot
	invalidLength
	invalidBlocks
	invalidPeers
)

func (d mpiDesc) kind() engine.CollKind { return engine.CollKind(d.code & 0xff) }
func (d mpiDesc) op() dist.Op           { return dist.Op(d.code >> 8) }

func (d mpiDesc) put(w []int64) { w[0], w[1], w[2], w[3] = d.code, d.length, d.root, d.invalid }

// descAt reads rank r's descriptor out of the exchange's result, width words per rank.
func descAt(w []int64, r, width int) mpiDesc {
	w = w[r*width : r*width+descWords]
	return mpiDesc{code: w[0], length: w[1], root: w[2], invalid: w[3]}
}

// newDesc validates the arguments of a collective of a job of size ranks.
func newDesc(k engine.CollKind, op dist.Op, length, root, size int) mpiDesc {
	d := mpiDesc{code: int64(k) | int64(op)<<8, length: int64(length), root: int64(root)}
	switch {
	case k == engine.CollAllReduce && op != dist.Sum && op != dist.Average:
		d.invalid = int64(invalidOp)
	case k == engine.CollBroadcast && (root < 0 || root >= size):
		d.invalid = int64(invalidRoot)
	case length > maxCount:
		d.invalid = int64(invalidLength)
	}
	return d
}

// key is the part of a descriptor that every rank must agree on: allgatherv ranks may
// send different lengths, the others must match in every argument.
func (d mpiDesc) key() mpiDesc {
	switch d.kind() {
	case engine.CollAllReduce:
		return mpiDesc{code: d.code, length: d.length}
	case engine.CollBroadcast:
		return mpiDesc{code: d.code, length: d.length, root: d.root}
	}
	return mpiDesc{code: d.code}
}

func (d mpiDesc) String() string {
	switch d.kind() {
	case engine.CollAllReduce:
		return fmt.Sprintf("allreduce (%v) of %d floats", d.op(), d.length)
	case engine.CollBroadcast:
		return fmt.Sprintf("broadcast of %d bytes from root %d", d.length, d.root)
	case engine.CollAllGatherV, engine.CollAllToAllV, engine.CollSendRecv, engine.CollBarrier:
		return d.kind().String()
	}
	return fmt.Sprintf("collective code %#x", d.code)
}

// invalidText says what is wrong with an invalid descriptor; every rank words it alike.
func (d mpiDesc) invalidText(size int) string {
	switch invalidReason(d.invalid) {
	case invalidOp:
		return fmt.Sprintf("allreduce op %v is neither dist.Sum nor dist.Average", d.op())
	case invalidRoot:
		return fmt.Sprintf("broadcast root %d outside [0, %d)", d.root, size)
	case invalidPeers:
		return fmt.Sprintf("sendrecv to rank %d from rank %d: out of [0, %d), or to itself but not from itself", d.root, d.length, size)
	case invalidBlocks:
		return fmt.Sprintf("alltoallv with %d blocks for %d ranks", d.root, size)
	case invalidLength:
		unit := "bytes"
		if d.kind() == engine.CollAllReduce {
			unit = "floats"
		}
		return fmt.Sprintf("%v of %d %s exceeds the MPI count limit of %d", d.kind(), d.length, unit, maxCount)
	}
	return fmt.Sprintf("invalid argument (reason %d)", d.invalid)
}

// agree checks the descriptors that every rank contributed to one collective (descs[r]
// is rank r's) and returns the fault that fails it, or nil. It depends on descs alone, so
// every rank reaches the same verdict, naming the same rank:
//
//   - an invalid argument names the lowest rank that passed one;
//   - a mismatch names the lowest rank that disagrees with the descriptor most ranks
//     issued (on a tie, the one of the lowest rank);
//   - an allgatherv whose total exceeds the MPI count limit names the rank whose bytes
//     overflow it.
func agree(self int, descs []mpiDesc) *engine.Fault {
	for r, d := range descs {
		if d.invalid != 0 {
			return &engine.Fault{Rank: r, Reporter: r, Cause: fmt.Errorf("%w: %s", dist.ErrInvalid, d.invalidText(len(descs)))}
		}
	}
	votes := make(map[mpiDesc]int, 1)
	for _, d := range descs {
		votes[d.key()]++
	}
	ref := 0
	for r, d := range descs {
		if votes[d.key()] > votes[descs[ref].key()] {
			ref = r
		}
	}
	for r, d := range descs {
		if d.key() != descs[ref].key() {
			return &engine.Fault{Rank: r, Reporter: self,
				Cause: engine.MismatchErr("issued %v where rank %d issued %v", d, ref, descs[ref])}
		}
	}
	if descs[0].kind() == engine.CollAllGatherV {
		var total int64
		for r, d := range descs {
			total += d.length
			if total > maxCount {
				return &engine.Fault{Rank: r, Reporter: self, Cause: fmt.Errorf(
					"%w: allgatherv: rank %d's %d bytes bring the total over the MPI count limit of %d", dist.ErrInvalid, r, d.length, maxCount)}
			}
		}
	}
	return nil
}

// Traffic estimates for dist.Stats. MPI does not say what its collectives put on the wire; the
// figures are the per-rank volumes of the bandwidth-optimal algorithms, the same cost
// model the TCP backend's ring and chain follow.

// stagingPool keeps the result buffers of finished allreduces for the next ones. A new
// buffer of the size of the message would be page-faulted in on every collective, which
// costs more than the collective itself on virtual machines that return freed memory to
// the host.
type stagingPool struct {
	mu   sync.Mutex
	free [][]float32
}

// maxStaging bounds the buffers the pool keeps: as many as allreduces usually in flight.
const maxStaging = 8

// get returns a buffer of n floats, the smallest free one that fits if any.
func (p *stagingPool) get(n int) []float32 {
	p.mu.Lock()
	best := -1
	for i, b := range p.free {
		if cap(b) >= n && (best < 0 || cap(b) < cap(p.free[best])) {
			best = i
		}
	}
	if best >= 0 {
		b := p.free[best]
		p.free = slices.Delete(p.free, best, best+1)
		p.mu.Unlock()
		return b[:n]
	}
	p.mu.Unlock()
	return make([]float32, n)
}

// put gives b back; beyond maxStaging buffers, the smallest is dropped.
func (p *stagingPool) put(b []float32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free = append(p.free, b[:cap(b)])
	if len(p.free) > maxStaging {
		small := 0
		for i, f := range p.free {
			if cap(f) < cap(p.free[small]) {
				small = i
			}
		}
		p.free = slices.Delete(p.free, small, small+1)
	}
}

// reset drops every buffer.
func (p *stagingPool) reset() {
	p.mu.Lock()
	p.free = nil
	p.mu.Unlock()
}
