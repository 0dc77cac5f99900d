package sim

import "testing"

// TestRevisionsLine: a map simulated by one build names it; one resumed by others says it
// mixes them, with each one's count of points.
func TestRevisionsLine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		points []MapPoint
		want   string
	}{
		{"none", nil, "No point simulated yet."},
		{"one", []MapPoint{{Revision: "abc"}, {Revision: "abc"}}, "Simulated at revision abc."},
		{"mixed", []MapPoint{{Revision: "abc"}, {Revision: "def (modified)"}, {}, {Revision: "abc"}},
			"**Mixed revisions**: the points were simulated by 3 builds: abc (2 points), def (modified) (1 point), unknown (1 point)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := revisionsLine(tc.points); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
