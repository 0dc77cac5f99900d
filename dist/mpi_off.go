//go:build !mpi

package dist

import "errors"

// MPIAvailable reports whether this binary was built with the MPI backend (build tag mpi).
const MPIAvailable = false

// NewMPI would join the Open MPI job this process belongs to, but this binary was built
// without MPI support: it always returns an error saying how to get it.
func NewMPI() (Communicator, error) {
	return nil, errors.New("dist: this binary was built without MPI support; rebuild with -tags mpi (needs Debian libopenmpi-dev)")
}
