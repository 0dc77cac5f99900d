package dist

import (
	"slices"
	"testing"

	"github.com/ssfusion/ssfusion/internal/faults"
)

// TestFaultPointsCanBeArmed: every transport fault point has a name, and SSF_FAULT can
// name it.
func TestFaultPointsCanBeArmed(t *testing.T) {
	for _, p := range FaultPoints() {
		if !slices.Contains(faults.Points, p.String()) {
			t.Errorf("fault point %v cannot be armed: faults.Points has %v", p, faults.Points)
		}
	}
	if len(FaultPoints()) != int(FaultShmStep) {
		t.Errorf("FaultPoints lists %d points, the constants run to %d", len(FaultPoints()), FaultShmStep)
	}
}
