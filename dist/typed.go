package dist

import (
	"fmt"
	"sync"

	"github.com/ssfusion/ssfusion/dist/internal/wire"
)

// Typed helpers over any Communicator. Elements travel little-endian; on a little-endian
// machine the send buffers go out as they are and the results are views of the received
// bytes, without a copy.

// AllGatherFloat32 is AllGatherV of float32 slices: result[r] is rank r's send.
func AllGatherFloat32(c Communicator, send []float32) ([][]float32, error) {
	return AllGatherFloat32Async(c, send).Wait()
}

// AllGatherInt32 is AllGatherV of int32 slices: result[r] is rank r's send.
func AllGatherInt32(c Communicator, send []int32) ([][]int32, error) {
	return AllGatherInt32Async(c, send).Wait()
}

// AllGatherFloat32Async starts an AllGatherFloat32; send must not be modified until Wait
// returns.
func AllGatherFloat32Async(c Communicator, send []float32) *TypedGatherHandle[float32] {
	return &TypedGatherHandle[float32]{h: c.AllGatherVAsync(wire.F32Bytes(send, wire.NativeLE)), decode: wire.BytesF32}
}

// AllGatherInt32Async starts an AllGatherInt32; send must not be modified until Wait
// returns.
func AllGatherInt32Async(c Communicator, send []int32) *TypedGatherHandle[int32] {
	return &TypedGatherHandle[int32]{h: c.AllGatherVAsync(wire.I32Bytes(send, wire.NativeLE)), decode: wire.BytesI32}
}

// TypedGatherHandle is the completion of a typed asynchronous allgather.
type TypedGatherHandle[T float32 | int32] struct {
	h      GatherHandle
	decode func([]byte, bool) []T
}

// Wait returns every rank's elements, indexed by rank. A rank whose byte count is not a
// multiple of 4 (it sent something else) makes Wait fail, naming that rank.
func (t *TypedGatherHandle[T]) Wait() ([][]T, error) {
	parts, err := t.h.Wait()
	if err != nil {
		return nil, err
	}
	out := make([][]T, len(parts))
	for r, p := range parts {
		if len(p)%4 != 0 {
			return nil, fmt.Errorf("dist: rank %d sent %d bytes to a 4-byte typed allgather", r, len(p))
		}
		out[r] = t.decode(p, wire.NativeLE)
		if out[r] == nil {
			out[r] = []T{}
		}
	}
	return out, nil
}

// BroadcastFloat32 is Broadcast of a float32 slice.
func BroadcastFloat32(c Communicator, buf []float32, root int) error {
	return BroadcastFloat32Async(c, buf, root).Wait()
}

// BroadcastFloat32Async starts a BroadcastFloat32; buf must not be touched until Wait
// returns.
func BroadcastFloat32Async(c Communicator, buf []float32, root int) Handle {
	if wire.NativeLE {
		return c.BroadcastAsync(wire.F32Bytes(buf, true), root)
	}
	encoded := wire.F32Bytes(buf, false) // a copy in wire order
	h := c.BroadcastAsync(encoded, root)
	return handleFunc(sync.OnceValue(func() error {
		if err := h.Wait(); err != nil {
			return err
		}
		copy(buf, wire.BytesF32(encoded, false))
		return nil
	}))
}

// handleFunc adapts a function to Handle.
type handleFunc func() error

func (f handleFunc) Wait() error { return f() }
