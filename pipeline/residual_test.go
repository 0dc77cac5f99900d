package pipeline

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestResidual(t *testing.T) {
	var m Residual
	g := []float32{1, 2, 3, 4}
	if err := m.Add(3, g); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g, []float32{1, 2, 3, 4}) {
		t.Fatalf("Add without a residual changed g to %v", g)
	}
	if err := m.Keep(3, g, []int32{1, 3}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g, []float32{1, 2, 3, 4}) {
		t.Fatalf("Keep changed g to %v", g)
	}
	if got, want := m.Get(3), []float32{1, 0, 3, 0}; !slices.Equal(got, want) {
		t.Fatalf("residual %v, want %v", got, want)
	}
	if m.Get(0) != nil || m.Get(99) != nil || m.Get(-1) != nil {
		t.Fatal("Get of a tensor without residual is not nil")
	}
	g2 := []float32{10, 10, 10, 10}
	if err := m.Add(3, g2); err != nil {
		t.Fatal(err)
	}
	if want := []float32{11, 10, 13, 10}; !slices.Equal(g2, want) {
		t.Fatalf("after Add g = %v, want %v", g2, want)
	}
	// Sending everything leaves nothing behind.
	if err := m.Keep(3, g2, []int32{0, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if got := m.Get(3); !slices.Equal(got, []float32{0, 0, 0, 0}) {
		t.Fatalf("residual %v after sending everything", got)
	}
	m.Reset()
	if m.Get(3) != nil {
		t.Fatal("Reset kept a residual")
	}
}

func TestResidualErrors(t *testing.T) {
	var m Residual
	if err := m.Keep(0, []float32{1, 2}, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    func() error
	}{
		{"add negative id", func() error { return m.Add(-1, []float32{1}) }},
		{"keep negative id", func() error { return m.Keep(-1, []float32{1}, nil) }},
		{"add wrong length", func() error { return m.Add(0, []float32{1, 2, 3}) }},
		{"keep wrong length", func() error { return m.Keep(0, []float32{1, 2, 3}, nil) }},
		{"index past end", func() error { return m.Keep(0, []float32{5, 6}, []int32{2}) }},
		{"negative index", func() error { return m.Keep(0, []float32{5, 6}, []int32{-1}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.f(); err == nil {
				t.Fatal("no error")
			}
			if got := m.Get(0); !slices.Equal(got, []float32{1, 2}) {
				t.Fatalf("a failed call changed the residual to %v", got)
			}
		})
	}
}

// TestErrorFeedback checks the invariant error feedback exists for: over many steps, what
// was sent plus what is still held back equals the sum of all gradients, so nothing is lost.
func TestErrorFeedback(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const n, k, steps = 200, 5, 30
	var m Residual
	var s TopK
	var idx []int32
	total := make([]float64, n)
	sent := make([]float64, n)
	for range steps {
		g := randGrad(r, n, 0)
		for i, v := range g {
			total[i] += float64(v)
		}
		if err := m.Add(0, g); err != nil {
			t.Fatal(err)
		}
		var err error
		if idx, err = s.Select(g, k, idx); err != nil {
			t.Fatal(err)
		}
		for _, i := range idx {
			sent[i] += float64(g[i])
		}
		if err := m.Keep(0, g, idx); err != nil {
			t.Fatal(err)
		}
	}
	res := m.Get(0)
	for i := range total {
		if d := total[i] - sent[i] - float64(res[i]); d > 1e-3 || d < -1e-3 {
			t.Fatalf("element %d: gradients sum to %g, sent %g + held %g", i, total[i], sent[i], res[i])
		}
	}
}
