package plots

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testTrace = `{"traceEvents": [
 {"name": "thread_name", "ph": "M", "tid": 0, "args": {"name": "compute"}},
 {"name": "thread_name", "ph": "M", "tid": 1, "args": {"name": "selection"}},
 {"name": "fwd", "ph": "X", "ts": 0, "dur": 100000, "tid": 0},
 {"name": "topk", "ph": "X", "ts": 60000, "dur": 50000, "tid": 1},
 {"name": "instant", "ph": "X", "ts": 70000, "dur": 0, "tid": 1}
]}`

func TestTimeline(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "timeline.json")
	if err := os.WriteFile(trace, []byte(testTrace), 0o644); err != nil {
		t.Fatal(err)
	}
	png := filepath.Join(t.TempDir(), "timeline.png")
	if err := Timeline(trace, png, "two lanes"); err != nil {
		t.Fatal(err)
	}
	img := decodeFigure(t, png)
	for i, c := range nameColors([]string{"selection", "compute"}) {
		if n := countColor(img, c); n < 500 {
			t.Errorf("lane %d's colour covers %d pixels, want a bar's worth", i, n)
		}
	}
}

func TestTimelineRefusesBadTraces(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, trace, want string }{
		{"not JSON", "{", "reading the timeline"},
		{"no events", `{"traceEvents": []}`, "holds no event"},
		{"negative duration", `{"traceEvents": [{"ph": "X", "ts": 1, "dur": -5, "tid": 0}]}`, "lasting -5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trace := filepath.Join(dir, tc.name+".json")
			if err := os.WriteFile(trace, []byte(tc.trace), 0o644); err != nil {
				t.Fatal(err)
			}
			png := filepath.Join(dir, tc.name+".png")
			err := Timeline(trace, png, "t")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
			if _, statErr := os.Stat(png); statErr == nil {
				t.Error("a chart was written")
			}
		})
	}
	if err := Timeline(filepath.Join(dir, "missing.json"), filepath.Join(dir, "m.png"), "t"); err == nil {
		t.Error("a missing trace drew a chart")
	}
}
