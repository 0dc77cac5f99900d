package fusion

import (
	"errors"
	"testing"

	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/pipeline"
)

// failingStage cannot plan.
type failingStage struct{ err error }

func (s failingStage) Plan(Engine, []Bucket) ([]int, bool, error) { return nil, false, s.err }
func (failingStage) Process(int, Slot, []float32) error           { return nil }
func (failingStage) Issue(int) Completion                         { return func() error { return nil } }
func (failingStage) Finish() error                                { return nil }
func (failingStage) Close() error                                 { return nil }

// A stage that cannot plan fails the first Wait and every later call, without panicking.
func TestFusionStageCannotPlan(t *testing.T) {
	comm := inproc.New(1)[0]
	defer comm.Close()
	tensors := []pipeline.Tensor{{ID: 0, Name: "w", Grad: make([]float32, 4)}}
	boom := errors.New("no memory for residuals")
	f, err := New(comm, tensors, 1024, failingStage{boom}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Push(0, make([]float32, 4)); err != nil {
		t.Fatal(err)
	}
	if err := f.Wait(); !errors.Is(err, boom) {
		t.Fatalf("first Wait: %v, want the planning error", err)
	}
	if err := f.Push(0, make([]float32, 4)); !errors.Is(err, boom) {
		t.Fatalf("Push after the failure: %v, want the planning error", err)
	}
	if err := f.Wait(); !errors.Is(err, boom) {
		t.Fatalf("Wait after the failure: %v, want the planning error", err)
	}
}

func TestStepperRejectsIDsThatAreNotPositions(t *testing.T) {
	comm := inproc.New(1)[0]
	defer comm.Close()
	if _, err := NewStepper(comm, []pipeline.Tensor{{ID: 1, Name: "w"}}, 1024); err == nil {
		t.Fatal("tensor with id 1 at position 0 accepted")
	}
	if _, err := NewStepper(comm, nil, 0); err == nil {
		t.Fatal("zero fusion threshold accepted")
	}
}
