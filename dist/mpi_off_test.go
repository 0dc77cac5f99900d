//go:build !mpi

package dist

import (
	"strings"
	"testing"
)

func TestNewMPIWithoutTag(t *testing.T) {
	if MPIAvailable {
		t.Error("MPIAvailable is true in a build without the mpi tag")
	}
	c, err := NewMPI()
	if c != nil || err == nil || !strings.Contains(err.Error(), "rebuild with -tags mpi") {
		t.Errorf("NewMPI() = %v, %v; want nil and an error saying how to rebuild", c, err)
	}
}
