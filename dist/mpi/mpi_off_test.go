//go:build !mpi

package mpi

import (
	"strings"
	"testing"
)

func TestNewWithoutTag(t *testing.T) {
	if Available {
		t.Error("Available is true in a build without the mpi tag")
	}
	c, err := New()
	if c != nil || err == nil || !strings.Contains(err.Error(), "rebuild with -tags mpi") {
		t.Errorf("New() = %v, %v; want nil and an error saying how to rebuild", c, err)
	}
}
