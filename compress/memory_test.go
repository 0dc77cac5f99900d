package compress

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestMemory(t *testing.T) {
	m, err := NewMemory([]int{4, -1, 2}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	acc, err := m.Accumulate(0, []float32{1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Sent(0, []int32{1, 3}); err != nil {
		t.Fatal(err)
	}
	if want := []float32{1, 0, 3, 0}; !slices.Equal(acc, want) || !slices.Equal(m.Residual(0), want) {
		t.Fatalf("after sending 1 and 3: accumulator %v, residual %v, want %v", acc, m.Residual(0), want)
	}
	if acc, _ = m.Accumulate(0, []float32{10, 10, 10, 10}); !slices.Equal(acc, []float32{11, 10, 13, 10}) {
		t.Fatalf("second step accumulates %v", acc)
	}
	if m.Residual(1) != nil || m.Residual(7) != nil || m.Residual(-1) != nil {
		t.Fatal("a tensor without memory has a residual")
	}
	// Binding puts the accumulator in caller storage, zeroed.
	buf := []float32{9, 9, 9, 9, 9}
	if err := m.Bind(2, buf[1:3]); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Accumulate(2, []float32{5, 6}); err != nil {
		t.Fatal(err)
	}
	if want := []float32{9, 5, 6, 9, 9}; !slices.Equal(buf, want) {
		t.Fatalf("bound storage %v, want %v", buf, want)
	}
}

func TestMemoryErrors(t *testing.T) {
	if _, err := NewMemory([]int{1}, Config{Momentum: 1}); err == nil {
		t.Error("momentum 1 accepted")
	}
	if _, err := NewMemory([]int{1}, Config{Momentum: -0.1}); err == nil {
		t.Error("negative momentum accepted")
	}
	if _, err := NewMemory([]int{1}, Config{Momentum: 0.9, NoErrorFeedback: true}); err == nil {
		t.Error("momentum correction without error feedback accepted")
	}
	m, err := NewMemory([]int{2, -1}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Accumulate(0, []float32{1, 2}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    func() error
	}{
		{"accumulate negative id", func() error { _, err := m.Accumulate(-1, []float32{1}); return err }},
		{"accumulate tensor without memory", func() error { _, err := m.Accumulate(1, []float32{1}); return err }},
		{"accumulate unknown id", func() error { _, err := m.Accumulate(5, []float32{1}); return err }},
		{"accumulate wrong length", func() error { _, err := m.Accumulate(0, []float32{1, 2, 3}); return err }},
		{"sent index past end", func() error { return m.Sent(0, []int32{0, 2}) }},
		{"sent negative index", func() error { return m.Sent(0, []int32{-1}) }},
		{"bind wrong length", func() error { return m.Bind(0, make([]float32, 3)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.f(); err == nil {
				t.Fatal("no error")
			}
			if got := m.Residual(0); !slices.Equal(got, []float32{1, 2}) {
				t.Fatalf("a failed call changed the memory to %v", got)
			}
		})
	}
}

// TestErrorFeedback checks the invariant error feedback exists for: over many steps, what
// was sent plus what is still held back equals everything fed in, so nothing is lost. With
// momentum correction what is fed in is the momentum-corrected gradient u.
func TestErrorFeedback(t *testing.T) {
	for _, momentum := range []float64{0, 0.9} {
		r := rand.New(rand.NewPCG(11, 12))
		const n, k, steps = 200, 5, 30
		m, err := NewMemory([]int{n}, Config{Momentum: momentum})
		if err != nil {
			t.Fatal(err)
		}
		var s TopK
		var idx []int32
		fed := make([]float64, n)
		sent := make([]float64, n)
		u := make([]float64, n) // reference momentum, with masking
		for range steps {
			g := randGrad(r, n, 0)
			for i, v := range g {
				u[i] = momentum*u[i] + float64(v)
				fed[i] += u[i]
			}
			acc, err := m.Accumulate(0, g)
			if err != nil {
				t.Fatal(err)
			}
			if idx, err = s.Select(acc, k, idx); err != nil {
				t.Fatal(err)
			}
			for _, i := range idx {
				sent[i] += float64(acc[i])
				u[i] = 0
			}
			if err := m.Sent(0, idx); err != nil {
				t.Fatal(err)
			}
		}
		res := m.Residual(0)
		for i := range fed {
			if d := fed[i] - sent[i] - float64(res[i]); d > 1e-3 || d < -1e-3 {
				t.Fatalf("momentum %g, element %d: fed %g, sent %g + held %g", momentum, i, fed[i], sent[i], res[i])
			}
		}
	}
}

// TestNoErrorFeedback checks that without error feedback every step selects from that
// step's gradient alone and the memory holds nothing between steps.
func TestNoErrorFeedback(t *testing.T) {
	m, err := NewMemory([]int{4, 3}, Config{NoErrorFeedback: true})
	if err != nil {
		t.Fatal(err)
	}
	buf := []float32{7, 7, 7, 7, 7}
	if err := m.Bind(1, buf[1:4]); err != nil {
		t.Fatal(err)
	}
	for step, tc := range []struct {
		id   int
		g    []float32
		sent []int32
	}{
		{0, []float32{1, -5, 3, 2}, []int32{1}},
		{0, []float32{4, 1, -1, 1}, []int32{0, 2}},
		{0, []float32{0, 0, 9, 0}, nil}, // nothing sent: still nothing kept
		{1, []float32{2, -3, 1}, []int32{1}},
		{1, []float32{1, 1, 1}, []int32{0}},
	} {
		acc, err := m.Accumulate(tc.id, tc.g)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(acc, tc.g) {
			t.Fatalf("step %d: selection reads %v, want the step's gradient %v", step, acc, tc.g)
		}
		if err := m.Sent(tc.id, tc.sent); err != nil {
			t.Fatal(err)
		}
		for id := range 2 {
			if r := m.Residual(id); slices.ContainsFunc(r, func(v float32) bool { return v != 0 }) {
				t.Fatalf("step %d: tensor %d holds %v after the step", step, id, r)
			}
		}
	}
	if buf[0] != 7 || buf[4] != 7 {
		t.Fatalf("bound storage written outside its range: %v", buf)
	}
	residuals, momenta := m.Export()
	if momenta != nil || len(residuals) != 2 || len(residuals[0]) != 4 {
		t.Fatalf("export: residuals %v, momenta %v", residuals, momenta)
	}
	if err := m.Sent(0, []int32{4}); err == nil {
		t.Fatal("an index out of range accepted")
	}
}
