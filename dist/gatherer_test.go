package dist_test

import (
	"testing"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/dist/internal/disttest"
)

// TestGatherer checks the fallback of a dist.Gatherer on a communicator that cannot gather
// into its buffer (shared memory's own case is TestShmGatherer).
func TestGatherer(t *testing.T) {
	comms := inproc.New(3, dist.WithLogger(disttest.QuietLog()))
	t.Cleanup(func() { disttest.CloseAll(comms) })
	disttest.CheckGatherer(t, comms, false)
}
