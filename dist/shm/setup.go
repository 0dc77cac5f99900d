package shm

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/engine"
	"github.com/ssfusion/ssfusion/dist/internal/wire"
)

// EnvSharedMemory set to off (or 0, false, no) keeps a job on TCP between ranks of one
// machine, like dist.WithSharedMemory(false).
const EnvSharedMemory = "SSF_SHM"

// EnvSharedMemoryChunk, read by rank 0, sets the bytes a rank moves through shared memory
// per step of a large collective (default 1 MiB; multiples of 64, at most 16 MiB). The
// segment holds 2(P+1) of them.
const EnvSharedMemoryChunk = "SSF_SHM_CHUNK"

// Defaults of the shared memory transport, which rank 0 chooses and offers.
const (
	defaultChunk = 1 << 20 // bytes of one slot: one step of a pipelined collective
	// Allreduce size up to which every rank sums whole buffers in one step instead of
	// streaming them through two steps of the pipeline: on small buffers, waiting for a
	// second step costs more than the sums that every rank then repeats.
	defaultSmall = 64 << 10
)

// geometry is the slot size and small-allreduce size that rank 0 offers. Tests choose
// small ones to run collectives of few bytes through many steps.
type geometry struct{ chunk, small int }

// Upgrade moves a TCP job onto shared memory when every rank can map the segment
// rank 0 creates, which proves that they share a machine (and a /dev/shm). Rank 0 offers
// the segment's secret name over the TCP mesh, whose peers all proved they hold the job
// token; every rank answers whether it could map it; rank 0 then removes the name, so
// that no process can open the segment any more. If any rank cannot, or does not want
// to, the job stays on TCP: a job across machines keeps TCP between all its ranks.
//
// Both rounds run on every rank of every job, on every system, so that ranks always
// issue the same collectives.
func Upgrade(e *engine.Engine) (dist.Communicator, error) {
	return upgrade(e, geometry{chunk: defaultChunk, small: defaultSmall})
}

func upgrade(e *engine.Engine, g geometry) (dist.Communicator, error) {
	chunk := g.chunk
	if v, err := strconv.Atoi(os.Getenv(EnvSharedMemoryChunk)); err == nil && v >= 64 && v <= dist.MaxSegmentSize {
		chunk = v &^ 63
	}
	want := !e.Options().NoSharedMemory && envAllowsShm() && e.Options().Bandwidth == 0 && e.Options().Latency == 0 && wire.NativeLE && Supported
	var offer []byte
	var seg *segment
	var name string
	if e.Rank() == 0 && want {
		var magic []byte
		var err error
		seg, name, magic, err = createSegment(e.Size(), chunk)
		if err != nil {
			e.Logger().Info("dist: shared memory unavailable, ranks talk over TCP", "err", err)
		} else {
			offer = binary.LittleEndian.AppendUint32(nil, uint32(chunk))
			offer = binary.LittleEndian.AppendUint32(offer, uint32(g.small))
			offer = append(offer, magic...)
			offer = append(offer, name...)
		}
	}
	fail := func(err error) (dist.Communicator, error) {
		if seg != nil {
			seg.unmap()
		}
		if name != "" {
			removeSegment(name)
		}
		e.Close()
		return nil, fmt.Errorf("dist: agree on shared memory: %w", err)
	}
	offers, err := e.AllGatherV(offer)
	if err != nil {
		return fail(err)
	}
	small := 0
	if o := offers[0]; len(o) > 8+shmMagicSize {
		chunk, small = int(binary.LittleEndian.Uint32(o)), int(binary.LittleEndian.Uint32(o[4:]))
		switch {
		case chunk < 64 || chunk > dist.MaxSegmentSize || chunk%64 != 0:
			e.Logger().Warn("dist: rank 0 offered shared memory of a bad geometry, ranks talk over TCP", "rank", e.Rank(), "chunk", chunk)
		case e.Rank() != 0 && want:
			seg, err = openSegment(string(o[8+shmMagicSize:]), o[8:8+shmMagicSize], e.Size(), chunk)
			if err != nil {
				e.Logger().Info("dist: cannot map rank 0's shared memory, ranks talk over TCP", "rank", e.Rank(), "err", err)
			}
		}
	}
	vote := []byte{0}
	if seg != nil {
		vote[0] = 1
	}
	votes, err := e.AllGatherV(vote)
	if name != "" {
		removeSegment(name)
		name = ""
	}
	if err != nil {
		return fail(err)
	}
	for _, v := range votes {
		if len(v) != 1 || v[0] != 1 {
			if seg != nil {
				seg.unmap()
			}
			e.HideSetup()
			return e, nil
		}
	}
	return newShmComm(e, seg, min(small, chunk)), nil
}

func envAllowsShm() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(EnvSharedMemory))) {
	case "off", "0", "false", "no":
		return false
	}
	return true
}
