//go:build !linux

package dist

import "errors"

// Shared memory between ranks is implemented on Linux only; elsewhere jobs stay on TCP.
const shmSupported = false

const shmMagicSize = 16

type segment struct{}

func (*segment) unmap() {}

var errNoShm = errors.New("dist: shared memory transport not implemented on this system")

func createSegment(size, chunk int) (*segment, string, []byte, error) { return nil, "", nil, errNoShm }

func openSegment(name string, magic []byte, size, chunk int) (*segment, error) {
	return nil, errNoShm
}

func removeSegment(string) {}

func newShmComm(e *engine, seg *segment, small int) Communicator { return e }
