package sim

import (
	"strings"
	"testing"
)

// TestSelectionModelsNamed: every selection model is found by its name, and its
// description, which reports quote, starts with that name.
func TestSelectionModelsNamed(t *testing.T) {
	names := SelectionModelNames()
	if len(names) < 2 {
		t.Fatalf("selection models %v, want cpu and gpu at least", names)
	}
	for _, name := range names {
		m, described, err := NamedSelectionModel(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.HasPrefix(described, name+": ") || len(m.Kinds) == 0 {
			t.Errorf("%s: description %q, %d kinds", name, described, len(m.Kinds))
		}
	}
	if _, _, err := NamedSelectionModel("tpu"); err == nil || !strings.Contains(err.Error(), `"tpu"`) {
		t.Errorf("unknown model: error %v, want one naming it", err)
	}
}
