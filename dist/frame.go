package dist

import (
	"encoding/binary"
	"fmt"
)

// Every message on a link is a frame: a fixed 32-byte header, then length payload bytes.
//
//	0      magic 0xD5
//	1      frame kind (data, heartbeat, goodbye, abort)
//	2      collective: kind in the low nibble, Op in the high nibble (data frames)
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
	headerSize   = 32
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

// collKind names a collective in frames, errors and stats.
type collKind uint8

const (
	collAllReduce collKind = 1 + iota
	collAllGatherV
	collBroadcast
	collBarrier
	collAllToAllV
	collSendRecv
	numColl
)

func (k collKind) String() string {
	switch k {
	case collAllReduce:
		return "allreduce"
	case collAllGatherV:
		return "allgatherv"
	case collBroadcast:
		return "broadcast"
	case collBarrier:
		return "barrier"
	case collAllToAllV:
		return "alltoallv"
	case collSendRecv:
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
	coll   uint8 // collKind | Op<<4
	algo   algo
	length uint32
	seq    uint64
	arg    uint64
	arg2   uint32
	arg3   uint32
}

func (h *header) put(b []byte) {
	_ = b[headerSize-1]
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

// parseHeader decodes and checks a header; its error wraps ErrProtocol.
func parseHeader(b []byte) (header, error) {
	_ = b[headerSize-1]
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
		return h, protocolErr("bad frame magic 0x%02x (not a dist peer, or the stream lost sync)", b[0])
	}
	switch h.kind {
	case frameData:
		if h.length > maxFrame {
			return h, protocolErr("frame of %d bytes exceeds the limit of %d", h.length, maxFrame)
		}
		if k := collKind(h.coll & 0xf); k == 0 || k >= numColl {
			return h, protocolErr("data frame for unknown collective kind %d", k)
		}
		if h.seq == 0 {
			return h, protocolErr("data frame with sequence number 0")
		}
	case frameHeartbeat, frameGoodbye:
		if h.length != 0 {
			return h, protocolErr("%v frame with %d payload bytes", h.kind, h.length)
		}
	case frameAbort:
		if h.length > maxAbortText {
			return h, protocolErr("abort frame of %d bytes exceeds the limit of %d", h.length, maxAbortText)
		}
	default:
		return h, protocolErr("unknown frame kind %d", uint8(h.kind))
	}
	return h, nil
}

// describe says what collective a data frame belongs to, for mismatch errors.
func describe(coll uint8, a algo, arg uint64, arg2 uint32) string {
	k, op := collKind(coll&0xf), Op(coll>>4)
	switch k {
	case collAllReduce:
		return fmt.Sprintf("allreduce(%v, %d floats, %v)", op, arg, a)
	case collBroadcast:
		return fmt.Sprintf("broadcast(root %d, %d bytes, %v)", arg2, arg, a)
	case collAllGatherV:
		return fmt.Sprintf("allgatherv(%v)", a)
	case collBarrier:
		return fmt.Sprintf("barrier(%v)", a)
	case collAllToAllV:
		return fmt.Sprintf("alltoallv(%v)", a)
	case collSendRecv:
		return fmt.Sprintf("sendrecv(%v)", a)
	}
	return k.String()
}
