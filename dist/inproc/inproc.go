// Package inproc runs a job whose ranks are goroutines of this process, for tests of code
// built on collectives. The ranks are joined pairwise by synchronous in-memory pipes
// (net.Pipe) and run the same engine as the TCP transport: framing, link emulation,
// timeouts and failure handling included.
package inproc

import (
	"fmt"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/engine"
)

// New returns the size communicators of an in-process job. It panics if size < 1 or an
// option is invalid, as those are programming errors. Close every communicator.
func New(size int, opts ...dist.Option) []dist.Communicator {
	if size < 1 {
		panic(fmt.Sprintf("inproc: New(%d): size must be at least 1", size))
	}
	o, err := dist.NewOptions(dist.Options{}, opts...)
	if err != nil {
		panic(err)
	}
	engines := engine.InProc(size, o)
	comms := make([]dist.Communicator, size)
	for r, e := range engines {
		comms[r] = e
	}
	return comms
}
