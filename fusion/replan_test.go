package fusion_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/fusion"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipeline/pipelinetest"
)

// replanStage is a dense stage (one allreduce per fusion buffer) that asks for a new plan
// when a step ends, as next says, and records every plan it is given.
type replanStage struct {
	comm    dist.Communicator
	tensors []pipeline.Tensor
	f       fusion.Engine
	bufs    []*fusion.DenseBuffer
	buckets []fusion.Bucket

	// next returns the plan to ask for at the end of step, nil for none.
	next func(step int, order []int) []fusion.Bucket
	// failAt makes Process fail in that step (after asking for next's plan); -1: never.
	failAt int

	plans      []planned
	replayed   []bool  // by step, as Finish saw it
	replanErrs []error // what Replan returned, in order
}

type planned struct {
	step    int
	buckets [][]int
}

func (s *replanStage) Plan(f fusion.Engine, buckets []fusion.Bucket) ([]int, bool, error) {
	s.f = f
	s.buckets = buckets
	s.bufs = s.bufs[:0]
	p := planned{step: f.Step()}
	parts := make([]int, len(buckets))
	for b, bucket := range buckets {
		s.bufs = append(s.bufs, fusion.NewDenseBuffer(s.tensors, bucket.Tensors))
		parts[b] = len(bucket.Tensors)
		p.buckets = append(p.buckets, slices.Clone(bucket.Tensors))
	}
	s.plans = append(s.plans, p)
	return parts, false, nil
}

func (s *replanStage) Process(_ int, slot fusion.Slot, grad []float32) error {
	if s.f.Step() == s.failAt {
		s.askReplan()
		return errors.New("injected failure")
	}
	s.bufs[slot.Bucket].Put(slot.Index, grad)
	s.f.Done(slot.Bucket)
	return nil
}

func (s *replanStage) Issue(b int) fusion.Completion { return s.bufs[b].AllReduce(s.comm) }

func (s *replanStage) Finish() error {
	for _, buf := range s.bufs {
		buf.Unpack(s.tensors)
	}
	s.replayed = append(s.replayed, s.f.Replayed())
	s.askReplan()
	return nil
}

func (s *replanStage) askReplan() {
	if s.next == nil {
		return
	}
	var order []int
	for _, b := range s.buckets {
		order = append(order, b.Tensors...)
	}
	if buckets := s.next(s.f.Step(), order); buckets != nil {
		s.replanErrs = append(s.replanErrs, s.f.Replan(buckets))
	}
}

func (s *replanStage) Close() error { return nil }

func groups(t *testing.T, tensors []pipeline.Tensor, order, counts []int) []fusion.Bucket {
	t.Helper()
	b, err := fusion.GroupBuckets(order, func(id int) int { return len(tensors[id].Grad) }, counts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReplan: a stage that asks for new plans between steps gets its Plan called again at
// the end of those steps, the steps after run with the new buffers, and the dense average
// is unchanged throughout.
func TestReplan(t *testing.T) {
	sizes := []int{50, 7, 300, 1, 64}
	grads := pipelinetest.Normal(sizes, nil)
	const world, steps = 3, 5
	stages := make([]*replanStage, world)
	var mu sync.Mutex
	res, err := pipelinetest.Run(world, sizes, nil, steps, grads, func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		s := &replanStage{comm: comm, tensors: tensors, failAt: -1}
		s.next = func(step int, order []int) []fusion.Bucket {
			switch step {
			case 1:
				return groups(t, tensors, order, []int{1, 1, 1, 1, 1})
			case 3:
				return groups(t, tensors, order, []int{5})
			}
			return nil
		}
		mu.Lock()
		stages[comm.Rank()] = s
		mu.Unlock()
		return fusion.New(comm, tensors, 4*100, s, false)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := pipelinetest.CheckMean(res, grads, 1e-6); err != nil {
		t.Fatal(err)
	}
	want := []planned{
		{0, [][]int{{4, 3}, {2}, {1, 0}}}, // by the 400-byte threshold, in backprop order
		{1, [][]int{{4}, {3}, {2}, {1}, {0}}},
		{3, [][]int{{4, 3, 2, 1, 0}}},
	}
	for r, s := range stages {
		if fmt.Sprint(s.plans) != fmt.Sprint(want) {
			t.Errorf("rank %d planned %v, want %v", r, s.plans, want)
		}
		if !slices.Equal(s.replayed, []bool{true, false, false, false, false}) {
			t.Errorf("rank %d: Replayed by step %v, want only the first step", r, s.replayed)
		}
		for _, err := range s.replanErrs {
			if err != nil {
				t.Errorf("rank %d: %v", r, err)
			}
		}
	}
}

// TestReplanRejectsBadPlans: a plan that does not cut the backprop order into consecutive
// buffers is refused at once and the pipeline runs on with its plan; so is a replan before
// the first plan exists.
func TestReplanRejectsBadPlans(t *testing.T) {
	sizes := []int{10, 20, 30}
	tensors := pipelinetest.Tensors(sizes)
	comm := inproc.New(1)[0]
	defer comm.Close()
	s := &replanStage{comm: comm, tensors: tensors, failAt: -1}
	f, err := fusion.New(comm, tensors, 1<<20, s, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Replan(groups(t, tensors, []int{2, 1, 0}, []int{3})); err == nil {
		t.Fatal("Replan before the first plan accepted")
	}
	bad := []struct {
		name    string
		buckets []fusion.Bucket
	}{
		{"wrong order", groups(t, tensors, []int{0, 1, 2}, []int{3})},
		{"missing tensor", groups(t, tensors, []int{2, 1}, []int{2})},
		{"empty buffer", append(groups(t, tensors, []int{2, 1, 0}, []int{3}), fusion.Bucket{})},
		{"bad offset", []fusion.Bucket{{Tensors: []int{2, 1, 0}, Offsets: []int{0, 30, 49}, Numel: 60}}},
		{"bad size", []fusion.Bucket{{Tensors: []int{2, 1, 0}, Offsets: []int{0, 30, 50}, Numel: 61}}},
		{"missing offsets", []fusion.Bucket{{Tensors: []int{2, 1, 0}, Numel: 60}}},
	}
	s.next = func(step int, _ []int) []fusion.Bucket {
		if step < len(bad) {
			return bad[step].buckets
		}
		return nil
	}
	for step := range len(bad) + 1 {
		for _, id := range []int{2, 1, 0} {
			if err := f.Push(id, make([]float32, sizes[id])); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
		if err := f.Wait(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	if len(s.replanErrs) != len(bad) {
		t.Fatalf("%d replans asked for, want %d", len(s.replanErrs), len(bad))
	}
	for i, err := range s.replanErrs {
		if err == nil {
			t.Errorf("%s: plan accepted", bad[i].name)
		}
	}
	if len(s.plans) != 1 {
		t.Errorf("the stage was planned %d times, want once", len(s.plans))
	}
}

// TestReplanDroppedWhenStepFails: a new plan asked for in a step that fails is not adopted.
func TestReplanDroppedWhenStepFails(t *testing.T) {
	sizes := []int{10, 20}
	tensors := pipelinetest.Tensors(sizes)
	comm := inproc.New(1)[0]
	defer comm.Close()
	s := &replanStage{comm: comm, tensors: tensors, failAt: 1}
	s.next = func(step int, order []int) []fusion.Bucket {
		if step == 1 {
			return groups(t, tensors, order, []int{1, 1})
		}
		return nil
	}
	f, err := fusion.New(comm, tensors, 1<<20, s, false)
	if err != nil {
		t.Fatal(err)
	}
	for step := range 3 {
		var pushErr error
		for _, id := range []int{1, 0} {
			if err := f.Push(id, make([]float32, sizes[id])); err != nil && pushErr == nil {
				pushErr = err
				break
			}
		}
		err := f.Wait()
		if step == 1 {
			if pushErr == nil || err == nil {
				t.Fatalf("step 1: push error %v, wait error %v; want the injected failure", pushErr, err)
			}
			continue
		}
		if pushErr != nil || err != nil {
			t.Fatalf("step %d: push error %v, wait error %v", step, pushErr, err)
		}
	}
	if len(s.plans) != 1 {
		t.Errorf("the stage was planned %d times, want once: the failed step's replan must be dropped", len(s.plans))
	}
}

func TestGroupBuckets(t *testing.T) {
	sizes := map[int]int{0: 10, 1: 20, 2: 5, 3: 100}
	numel := func(id int) int { return sizes[id] }
	order := []int{3, 2, 1, 0}
	got, err := fusion.GroupBuckets(order, numel, []int{1, 2, 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []fusion.Bucket{
		{Tensors: []int{3}, Offsets: []int{0}, Numel: 100},
		{Tensors: []int{2, 1}, Offsets: []int{0, 5}, Numel: 25},
		{Tensors: []int{0}, Offsets: []int{0}, Numel: 10},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("GroupBuckets = %v, want %v", got, want)
	}
	for _, counts := range [][]int{{1, 2}, {1, 2, 2}, {4, 0}, {-1, 5}} {
		if _, err := fusion.GroupBuckets(order, numel, counts); err == nil {
			t.Errorf("counts %v accepted for %d tensors", counts, len(order))
		}
	}
}
