package engine

import (
	"fmt"

	"github.com/ssfusion/ssfusion/dist"
)

// AllToAllV implements dist.Communicator.
func (e *Engine) AllToAllV(send [][]byte) ([][]byte, error) {
	c, err := e.begin(CollAllToAllV)
	if err != nil {
		return nil, err
	}
	out, err := c.allToAllV(send)
	if err = c.end(err); err != nil {
		return nil, err
	}
	return out, nil
}

// AllToAllVAsync implements dist.Communicator.
func (e *Engine) AllToAllVAsync(send [][]byte) dist.GatherHandle {
	c, err := e.begin(CollAllToAllV)
	if err != nil {
		return GatherHandle{FailedHandle(err)}
	}
	h := NewHandle()
	go func() {
		out, err := c.allToAllV(send)
		if err = c.end(err); err != nil {
			out = nil
		}
		h.Finish(out, err)
	}()
	return GatherHandle{h}
}

// AllToAllVArgs is the argument check of every backend: one block per rank, each within
// the message limit. It says what is wrong, or returns "".
func AllToAllVArgs(send [][]byte, size int, limit int64) string {
	if len(send) != size {
		return fmt.Sprintf("alltoallv with %d blocks for %d ranks", len(send), size)
	}
	for p, b := range send {
		if int64(len(b)) > limit {
			return fmt.Sprintf("alltoallv block of %d bytes for rank %d exceeds the limit of %d (dist.WithMaxMessage)", len(b), p, limit)
		}
	}
	return ""
}

// allToAllV is the pairwise exchange: in step i (1 <= i < P) rank r sends its block for
// rank r+i and receives rank r-i's block for it, and the step's sends are written before
// the next step starts. Only one outgoing link per rank is busy at a time, so on shaped
// links the time follows the cost model of a NIC-bound cluster: the sum over steps of the
// largest block of the step. Every frame carries the block's total size (arg) and its
// sender (arg2), so the receiver allocates the block once, after checking the size.
func (c *coll) allToAllV(send [][]byte) ([][]byte, error) {
	e := c.e
	P, r := e.size, e.rank
	if bad := AllToAllVArgs(send, P, e.o.MaxMessage); bad != "" {
		return nil, c.invalid("%s", bad)
	}
	if err := c.ready(); err != nil {
		return nil, err
	}
	out := make([][]byte, P)
	out[r] = append(make([]byte, 0, len(send[r])), send[r]...)
	c.algo = algoPairwise
	for i := 1; i < P; i++ {
		to, from := (r+i)%P, (r-i+P)%P
		if err := c.sendBlock(to, send[to]); err != nil {
			return nil, err
		}
		blk, err := c.recvBlock(from)
		if err != nil {
			return nil, err
		}
		out[from] = blk
		if err := c.waitSends(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sendBlock queues b for peer in frames of at most a segment, each carrying the block's
// size and this rank as its sender; an empty block is one empty frame.
func (c *coll) sendBlock(peer int, b []byte) error {
	r := uint32(c.e.rank)
	if len(b) == 0 {
		return c.send(peer, 0, r, nil)
	}
	for s := 0; s < len(b); s += c.e.o.SegmentSize {
		if err := c.send(peer, uint64(len(b)), r, b[s:min(s+c.e.o.SegmentSize, len(b))]); err != nil {
			return err
		}
	}
	return nil
}

// recvBlock receives the block that peer sends this rank in an alltoallv.
func (c *coll) recvBlock(peer int) ([]byte, error) {
	e := c.e
	var blk []byte
	for off := 0; ; {
		f, err := c.recv(peer)
		if err != nil {
			return nil, err
		}
		n := f.size()
		switch {
		case f.h.arg2 != uint32(peer):
			c.release(f)
			return nil, c.protocol(peer, "alltoallv block from rank %d on rank %d's link", f.h.arg2, peer)
		case blk == nil && f.h.arg > uint64(e.o.MaxMessage):
			c.release(f)
			return nil, c.protocol(peer, "alltoallv block of %d bytes exceeds the limit of %d", f.h.arg, e.o.MaxMessage)
		case blk == nil:
			blk = make([]byte, f.h.arg)
			// The frames that follow can go straight into place.
			c.expect(peer, int64(n), blk[min(n, len(blk)):])
		}
		if f.h.arg != uint64(len(blk)) || off+n > len(blk) || (n == 0 && len(blk) > 0) || (f.direct && off == 0) {
			c.release(f)
			return nil, c.protocol(peer, "frame of %d bytes at offset %d of a %d-byte block (announced %d)", n, off, len(blk), f.h.arg)
		}
		if !f.direct {
			copy(blk[off:], f.payload())
		}
		c.release(f)
		if off += n; off == len(blk) {
			return blk, nil
		}
	}
}

// SendRecv implements dist.Communicator.
func (e *Engine) SendRecv(send []byte, to, from int) ([]byte, error) {
	c, err := e.begin(CollSendRecv)
	if err != nil {
		return nil, err
	}
	out, err := c.sendRecv(send, to, from)
	if err = c.end(err); err != nil {
		return nil, err
	}
	return out, nil
}

// SendRecvArgs is the argument check of every backend; it says what is wrong, or
// returns "".
func SendRecvArgs(send []byte, to, from, rank, size int, limit int64) string {
	switch {
	case to < 0 || to >= size || from < 0 || from >= size:
		return fmt.Sprintf("sendrecv to rank %d from rank %d outside [0, %d)", to, from, size)
	case (to == rank) != (from == rank):
		return fmt.Sprintf("sendrecv of rank %d to rank %d from rank %d: a rank sends to itself exactly when it receives from itself", rank, to, from)
	case int64(len(send)) > limit:
		return fmt.Sprintf("sendrecv of %d bytes exceeds the limit of %d (dist.WithMaxMessage)", len(send), limit)
	}
	return ""
}

// sendRecv sends the block to its peer and receives the other peer's, as one step of the
// pairwise exchange; frames carry the block's size and sender as in allToAllV.
func (c *coll) sendRecv(send []byte, to, from int) ([]byte, error) {
	e := c.e
	if bad := SendRecvArgs(send, to, from, e.rank, e.size, e.o.MaxMessage); bad != "" {
		return nil, c.invalid("%s", bad)
	}
	if err := c.ready(); err != nil {
		return nil, err
	}
	if to == e.rank {
		return append(make([]byte, 0, len(send)), send...), nil
	}
	c.algo = algoPairwise
	if err := c.sendBlock(to, send); err != nil {
		return nil, err
	}
	blk, err := c.recvBlock(from)
	if err != nil {
		return nil, err
	}
	return blk, c.waitSends()
}
