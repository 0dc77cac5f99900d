package dist

import "unsafe"

// A Gatherer runs allgathers and all-to-all exchanges whose result lands in a buffer it
// keeps from one call to the next, as the caller of MPI_Allgatherv or MPI_Alltoallv
// supplies its receive buffer. AllGatherV and AllToAllV must return blocks of their own,
// and a fresh allocation per call costs more than the exchange itself for small messages
// between processes of one machine, and its zeroing a good part of it for large ones: the
// memory is new to the cache each time, and the garbage collector runs the more often. A
// Gatherer spares both where the communicator can receive into a given buffer (shared
// memory does); elsewhere it calls the Communicator's method.
//
// The blocks of one call are valid until the next call of either method; they share the
// kept buffer, each capped at its own length. A Gatherer serves one caller at a time.
type Gatherer struct {
	c      Communicator
	buf    []byte
	blocks [][]byte
}

// NewGatherer returns a Gatherer for the collectives of c.
func NewGatherer(c Communicator) *Gatherer { return &Gatherer{c: c} }

// GatherInto is implemented by communicators that can gather into a caller's buffer, as
// the shared memory transport's can. AllGatherVInto returns the blocks, laid out in rank
// order in buf when it is large enough (else in a buffer it allocates), and the buffer it
// used; blocks is reused when its capacity suffices. A Gatherer uses it where it exists.
type GatherInto interface {
	AllGatherVInto(send, buf []byte, blocks [][]byte) ([][]byte, []byte, error)
}

// AllGatherV is Communicator.AllGatherV, with the blocks in the Gatherer's buffer.
func (g *Gatherer) AllGatherV(send []byte) ([][]byte, error) {
	gi, ok := g.c.(GatherInto)
	if !ok {
		return g.c.AllGatherV(send)
	}
	return g.keep(gi.AllGatherVInto(send, g.bufFor(send), g.blocks))
}

// bufFor is the kept buffer, or nil when a block to send is (part of) a block of the last
// call, which the call must not overwrite while it reads it.
func (g *Gatherer) bufFor(send ...[]byte) []byte {
	for _, b := range send {
		if overlaps(b, g.buf) {
			return nil
		}
	}
	return g.buf
}

// keep keeps the buffer and blocks of a call's result for the next call.
func (g *Gatherer) keep(blocks [][]byte, buf []byte, err error) ([][]byte, error) {
	if err != nil {
		return nil, err
	}
	g.buf, g.blocks = buf, blocks
	return blocks, nil
}

// ExchangeInto is implemented by communicators that can receive an all-to-all exchange
// into a caller's buffer, as the shared memory transport's can. AllToAllVInto returns the
// received blocks, laid out in rank order in buf when it is large enough (else in a
// buffer it allocates), and the buffer it used; blocks is reused when its capacity
// suffices. A Gatherer uses it where it exists.
type ExchangeInto interface {
	AllToAllVInto(send [][]byte, buf []byte, blocks [][]byte) ([][]byte, []byte, error)
}

// AllToAllV is Communicator.AllToAllV, with the received blocks in the Gatherer's buffer.
func (g *Gatherer) AllToAllV(send [][]byte) ([][]byte, error) {
	ex, ok := g.c.(ExchangeInto)
	if !ok {
		return g.c.AllToAllV(send)
	}
	return g.keep(ex.AllToAllVInto(send, g.bufFor(send...), g.blocks))
}

// overlaps reports whether a shares memory with b's capacity.
func overlaps(a, b []byte) bool {
	if len(a) == 0 || cap(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return a0 < b0+uintptr(cap(b)) && b0 < a0+uintptr(len(a))
}
