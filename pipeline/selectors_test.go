package pipeline

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestNewSelector(t *testing.T) {
	if names := SelectorNames(); !slices.IsSorted(names) || len(names) == 0 {
		t.Fatalf("SelectorNames() = %v, want a sorted, non-empty list", names)
	}
	g := []float32{3, -1, 4, -1, 5, -9, 2, 6}
	for _, c := range []struct {
		name string
		want string // type of the selector
	}{{"topk", "*pipeline.TopK"}, {"", "*pipeline.TopK"}, {"sampled", "*pipeline.SampledThreshold"}} {
		a, err := NewSelector(c.name, 1)
		if err != nil {
			t.Fatalf("NewSelector(%q): %v", c.name, err)
		}
		if got := fmt.Sprintf("%T", a); got != c.want {
			t.Errorf("NewSelector(%q) is a %s, want %s", c.name, got, c.want)
		}
		b, _ := NewSelector(c.name, 1)
		if a == b {
			t.Errorf("NewSelector(%q) returned the same selector twice", c.name)
		}
		idx, err := a.Select(g, 3, nil)
		if err != nil || !slices.Equal(idx, []int32{4, 5, 7}) {
			t.Errorf("NewSelector(%q).Select = %v, %v; want [4 5 7]", c.name, idx, err)
		}
	}
	for _, name := range SelectorNames() {
		if _, err := NewSelector(name, 0); err != nil {
			t.Errorf("listed name %q: %v", name, err)
		}
	}
	for _, name := range []string{"dgc", "TopK", "top-k "} {
		s, err := NewSelector(name, 0)
		if err == nil {
			t.Fatalf("NewSelector(%q) = %T, want an error", name, s)
		}
		msg := err.Error()
		if !strings.Contains(msg, `"`+name+`"`) || !strings.Contains(msg, strings.Join(SelectorNames(), ", ")) {
			t.Errorf("NewSelector(%q) error %q should name it and list %v", name, msg, SelectorNames())
		}
	}
}
