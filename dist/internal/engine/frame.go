package engine

import (
	"encoding/binary"
	"fmt"

	"github.com/ssfusion/ssfusion/dist"
)

// Every message on a link is a frame: a fixed 32-byte header, then length payload bytes.
//
//	0      magic 0xD5
//	1      frame kind (data, heartbeat, goodbye, abort)
//	2      collective: kind in the low nibble, dist.Op in the high nibble (data frames)
//	3      algorithm (data frames)
//	4:8    payload length, little-endian
//	8:16   sequence number of the collective (data frames)
//	16:24  arg: the collective's size (elements, bytes), a round, a rank ...
//	24:28  arg2: root or block owner; abort: cause code
//	28:32  arg3: abort: reporting rank
//
// A receiver checks magic, kind and length against the limits before it allocates, and
// a data frame's collective, algorithm and arguments against its own collective, so that
// ranks that disagree fail loudly instead of mixing buffers.
const (
	HeaderSize   = 32
	frameMagic   = 0xD5
	maxAbortText = 1 << 10
)

type frameKind uint8

const (
	frameData frameKind = 1 + iota
	frameHeartbeat
	frameGoodbye
	frameAbort
)

func (k frameKind) String() string {
	switch k {
	case frameData:
		return "data"
	case frameHeartbeat:
		return "heartbeat"
	case frameGoodbye:
		return "goodbye"
	case frameAbort:
		return "abort"
	}
	return fmt.Sprintf("frame kind %d", uint8(k))
}

// CollKind names a collective in frames, errors and stats.
type CollKind uint8

const (
	CollAllReduce CollKind = 1 + iota
	CollAllGatherV
	CollBroadcast
	CollBarrier
	CollAllToAllV
	CollSendRecv
	NumColl
)

func (k CollKind) String() string {
	switch k {
	case CollAllReduce:
		return "allreduce"
	case CollAllGatherV:
		return "allgatherv"
	case CollBroadcast:
		return "broadcast"
	case CollBarrier:
		return "barrier"
	case CollAllToAllV:
		return "alltoallv"
	case CollSendRecv:
		return "sendrecv"
	}
	return fmt.Sprintf("collective %d", uint8(k))
}

// algo names the algorithm a collective runs; ranks must agree on it.
type algo uint8

const (
	algoNone algo = iota
	algoRing
	algoRecDoubling
	algoChain
	algoTree
	algoDissemination
	algoPairwise
)

func (a algo) String() string {
	switch a {
	case algoNone:
		return "none"
	case algoRing:
		return "ring"
	case algoRecDoubling:
		return "recursive doubling"
	case algoChain:
		return "chain"
	case algoTree:
		return "binomial tree"
	case algoDissemination:
		return "dissemination"
	case algoPairwise:
		return "pairwise exchange"
	}
	return fmt.Sprintf("algorithm %d", uint8(a))
}

type header struct {
	kind   frameKind
	coll   uint8 // CollKind | dist.Op<<4
	algo   algo
	length uint32
	seq    uint64
	arg    uint64
	arg2   uint32
	arg3   uint32
}

func (h *header) put(b []byte) {
	_ = b[HeaderSize-1]
	b[0] = frameMagic
	b[1] = byte(h.kind)
	b[2] = h.coll
	b[3] = byte(h.algo)
	binary.LittleEndian.PutUint32(b[4:], h.length)
	binary.LittleEndian.PutUint64(b[8:], h.seq)
	binary.LittleEndian.PutUint64(b[16:], h.arg)
	binary.LittleEndian.PutUint32(b[24:], h.arg2)
	binary.LittleEndian.PutUint32(b[28:], h.arg3)
}

// parseHeader decodes and checks a header; its error wraps dist.ErrProtocol.
func parseHeader(b []byte) (header, error) {
	_ = b[HeaderSize-1]
	h := header{
		kind:   frameKind(b[1]),
		coll:   b[2],
		algo:   algo(b[3]),
		length: binary.LittleEndian.Uint32(b[4:]),
		seq:    binary.LittleEndian.Uint64(b[8:]),
		arg:    binary.LittleEndian.Uint64(b[16:]),
		arg2:   binary.LittleEndian.Uint32(b[24:]),
		arg3:   binary.LittleEndian.Uint32(b[28:]),
	}
	if b[0] != frameMagic {
		return h, ProtocolErr("bad frame magic 0x%02x (not a dist peer, or the stream lost sync)", b[0])
	}
	switch h.kind {
	case frameData:
		if h.length > dist.MaxSegmentSize {
			return h, ProtocolErr("frame of %d bytes exceeds the limit of %d", h.length, dist.MaxSegmentSize)
		}
		if k := CollKind(h.coll & 0xf); k == 0 || k >= NumColl {
			return h, ProtocolErr("data frame for unknown collective kind %d", k)
		}
		if h.seq == 0 {
			return h, ProtocolErr("data frame with sequence number 0")
		}
	case frameHeartbeat, frameGoodbye:
		if h.length != 0 {
			return h, ProtocolErr("%v frame with %d payload bytes", h.kind, h.length)
		}
	case frameAbort:
		if h.length > maxAbortText {
			return h, ProtocolErr("abort frame of %d bytes exceeds the limit of %d", h.length, maxAbortText)
		}
	default:
		return h, ProtocolErr("unknown frame kind %d", uint8(h.kind))
	}
	return h, nil
}

// describe says what collective a data frame belongs to, for mismatch errors.
func describe(coll uint8, a algo, arg uint64, arg2 uint32) string {
	k, op := CollKind(coll&0xf), dist.Op(coll>>4)
	switch k {
	case CollAllReduce:
		return fmt.Sprintf("allreduce(%v, %d floats, %v)", op, arg, a)
	case CollBroadcast:
		return fmt.Sprintf("broadcast(root %d, %d bytes, %v)", arg2, arg, a)
	case CollAllGatherV:
		return fmt.Sprintf("allgatherv(%v)", a)
	case CollBarrier:
		return fmt.Sprintf("barrier(%v)", a)
	case CollAllToAllV:
		return fmt.Sprintf("alltoallv(%v)", a)
	case CollSendRecv:
		return fmt.Sprintf("sendrecv(%v)", a)
	}
	return k.String()
}
