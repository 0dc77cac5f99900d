package pipeline

import (
	"errors"
	"testing"
)

func TestLocal(t *testing.T) {
	tensors := []Tensor{{ID: 0, Name: "a", Grad: make([]float32, 3)}, {ID: 1, Name: "b", Grad: make([]float32, 2)}}
	tests := []struct {
		name   string
		pushes []int
		sizes  []int
		want   any // nil or a pointer to the error type expected
	}{
		{"all once", []int{1, 0}, []int{2, 3}, nil},
		{"missing", []int{1}, []int{2}, new(*MissingPushError)},
		{"twice", []int{1, 1}, []int{2, 2}, new(*DuplicatePushError)},
		{"unknown", []int{2}, []int{1}, new(*UnknownTensorError)},
		{"wrong size", []int{0}, []int{2}, new(*SizeError)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewLocal(tensors)
			var err error
			for i, id := range tc.pushes {
				if err = p.Push(id, make([]float32, tc.sizes[i])); err != nil {
					break
				}
			}
			if err == nil {
				err = p.Wait()
			}
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !errors.As(err, tc.want) {
				t.Fatalf("got error %v, want %T", err, tc.want)
			}
		})
	}
}

func TestLocalResetsBetweenSteps(t *testing.T) {
	p := NewLocal([]Tensor{{ID: 0, Name: "a", Grad: make([]float32, 1)}})
	for step := 0; step < 3; step++ {
		if err := p.Push(0, []float32{1}); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if err := p.Wait(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}
