package dist

import (
	"fmt"
	"net"
)

// NewInProc returns the size communicators of a job whose ranks are goroutines of this
// process, for tests of code built on collectives. The ranks are joined pairwise by
// synchronous in-memory pipes (net.Pipe) and run the same engine as the TCP backend:
// framing, link emulation, timeouts and failure handling included. It panics if size < 1
// or an option is invalid, as those are programming errors. Close every communicator.
func NewInProc(size int, opts ...Option) []Communicator {
	if size < 1 {
		panic(fmt.Sprintf("dist: NewInProc(%d): size must be at least 1", size))
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.resolve(); err != nil {
		panic(err)
	}
	engines := newInProcEngines(size, o)
	comms := make([]Communicator, size)
	for r, e := range engines {
		comms[r] = e
	}
	return comms
}

// newInProcEngines wires size engines with pipes.
func newInProcEngines(size int, o options) []*engine {
	conns := pipeMesh(size)
	engines := make([]*engine, size)
	for r := range size {
		engines[r] = newEngine(r, size, conns[r], o)
	}
	return engines
}

// pipeMesh returns conns[i][j], the end at rank i of the pipe between ranks i and j.
func pipeMesh(size int) [][]net.Conn {
	conns := make([][]net.Conn, size)
	for i := range conns {
		conns[i] = make([]net.Conn, size)
	}
	for i := range size {
		for j := i + 1; j < size; j++ {
			conns[i][j], conns[j][i] = net.Pipe()
		}
	}
	return conns
}
