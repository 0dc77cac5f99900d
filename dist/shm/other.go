//go:build !linux

package shm

import (
	"errors"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/engine"
)

// Shared memory between ranks is implemented on Linux only; elsewhere jobs stay on TCP.
const Supported = false

const shmMagicSize = 16

type segment struct{}

func (*segment) unmap() {}

var errNoShm = errors.New("dist: shared memory transport not implemented on this system")

func createSegment(size, chunk int) (*segment, string, []byte, error) { return nil, "", nil, errNoShm }

func openSegment(name string, magic []byte, size, chunk int) (*segment, error) {
	return nil, errNoShm
}

func removeSegment(string) {}

func newShmComm(e *engine.Engine, seg *segment, small int) dist.Communicator { return e }
