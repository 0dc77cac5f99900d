//go:build !mpi

package mpi

import (
	"errors"

	"github.com/ssfusion/ssfusion/dist"
)

// Available reports whether this binary was built with the MPI backend (build tag mpi).
const Available = false

// New would join the Open MPI job this process belongs to, but this binary was built
// without MPI support: it always returns an error saying how to get it.
func New() (dist.Communicator, error) {
	return nil, errors.New("dist: this binary was built without MPI support; rebuild with -tags mpi (needs Debian libopenmpi-dev)")
}
