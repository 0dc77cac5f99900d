package baselines

import (
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/fusion"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipeline/pipelinetest"
)

// rankGrads returns the gradients rank r produces in step s for tensors of the given sizes.
func rankGrads(sizes []int, r, s int) [][]float32 {
	rng := rand.New(rand.NewPCG(uint64(r), uint64(s)))
	out := make([][]float32, len(sizes))
	for i, n := range sizes {
		out[i] = make([]float32, n)
		for j := range out[i] {
			out[i][j] = float32(rng.NormFloat64())
		}
	}
	return out
}

func newTensors(sizes []int) []pipeline.Tensor {
	ts := make([]pipeline.Tensor, len(sizes))
	for i, n := range sizes {
		ts[i] = pipeline.Tensor{ID: i, Name: "t" + string(rune('a'+i)), Grad: make([]float32, n)}
	}
	return ts
}

func TestDenseAveragesAcrossRanks(t *testing.T) {
	sizes := []int{5, 1, 1009, 64, 0, 300}
	order := []int{5, 3, 4, 2, 1, 0} // backprop order: last layer first
	for _, tc := range []struct {
		name      string
		ranks     int
		threshold int
	}{
		{"one rank", 1, 1 << 20},
		{"two ranks one buffer", 2, 1 << 20},
		{"three ranks small buffers", 3, 4 * 100},
		{"four ranks buffer per tensor", 4, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comms := inproc.New(tc.ranks)
			results := make([][][][]float32, tc.ranks) // rank, step, tensor
			var wg sync.WaitGroup
			errs := make([]error, tc.ranks)
			for r := range tc.ranks {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer comms[r].Close()
					errs[r] = runDense(comms[r], sizes, order, tc.threshold, 3, &results[r])
				}()
			}
			wg.Wait()
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			for s := range 3 {
				for i, n := range sizes {
					for j := range n {
						var sum float64
						for r := range tc.ranks {
							sum += float64(rankGrads(sizes, r, s)[i][j])
						}
						want := sum / float64(tc.ranks)
						got := results[0][s][i][j]
						if d := float64(got) - want; d > 1e-5 || d < -1e-5 {
							t.Fatalf("step %d tensor %d[%d] = %v, want %v", s, i, j, got, want)
						}
						for r := 1; r < tc.ranks; r++ {
							if results[r][s][i][j] != got {
								t.Fatalf("step %d tensor %d[%d]: rank %d has %v, rank 0 %v", s, i, j, r, results[r][s][i][j], got)
							}
						}
					}
				}
			}
		})
	}
}

// runDense drives a Dense pipeline through steps as a trainer would and keeps each step's
// averaged gradients.
func runDense(comm dist.Communicator, sizes, order []int, threshold, steps int, out *[][][]float32) error {
	tensors := newTensors(sizes)
	d, err := NewDense(comm, tensors, threshold)
	if err != nil {
		return err
	}
	for s := range steps {
		grads := rankGrads(sizes, comm.Rank(), s)
		for _, id := range order {
			copy(tensors[id].Grad, grads[id])
			if err := d.Push(id, grads[id]); err != nil {
				return err
			}
		}
		if err := d.Wait(); err != nil {
			return err
		}
		step := make([][]float32, len(sizes))
		for i, tsr := range tensors {
			step[i] = append([]float32(nil), tsr.Grad...)
		}
		*out = append(*out, step)
	}
	return nil
}

func TestDenseStartsAllreduceDuringBackward(t *testing.T) {
	sizes := []int{100, 100, 100}
	comms := inproc.New(2)
	var wg sync.WaitGroup
	issuedBeforeLastPush := make([]int, 2)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer comms[r].Close()
			tensors := newTensors(sizes)
			d, err := NewDense(comms[r], tensors, 4*100) // a buffer per tensor
			if err != nil {
				t.Error(err)
				return
			}
			for s := range 2 {
				before := comms[r].Stats().AllReduce.Calls
				for i, id := range []int{2, 1, 0} {
					if i == 2 && s == 1 {
						issuedBeforeLastPush[r] = waitCalls(comms[r], before+2) - int(before)
					}
					if err := d.Push(id, tensors[id].Grad); err != nil {
						t.Error(err)
						return
					}
				}
				if err := d.Wait(); err != nil {
					t.Error(err)
					return
				}
			}
			if m := d.Metrics(); m.BytesSent == 0 || m.DenseBytes != fusion.RingAllReduceBytes(300, 2) {
				t.Errorf("rank %d metrics: %+v", r, m)
			}
		}()
	}
	wg.Wait()
	for r, n := range issuedBeforeLastPush {
		if n != 2 {
			t.Errorf("rank %d: %d allreduces started before the last gradient arrived, want 2", r, n)
		}
	}
}

func TestDenseRejectsBadPushes(t *testing.T) {
	comms := inproc.New(1)
	defer comms[0].Close()
	d, err := NewDense(comms[0], newTensors([]int{2, 3}), 1024)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Push(0, make([]float32, 3)); err == nil {
		t.Error("a gradient of the wrong size was accepted")
	}
	if err := d.Push(0, make([]float32, 2)); err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(); err == nil {
		t.Error("a step without tensor 1 was accepted")
	}
	if _, err := NewDense(comms[0], nil, 0); err == nil {
		t.Error("a zero threshold was accepted")
	}
}

// waitCalls waits, up to a generous deadline, until comm has issued at least want
// allreduces, and returns how many it has issued.
func waitCalls(comm dist.Communicator, want int64) int {
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := comm.Stats().AllReduce.Calls
		if n >= want || time.Now().After(deadline) {
			return int(n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDenseResume: a dense pipeline restored from a checkpoint (the step count and the
// backprop order, from which it rebuilds its buffers without replaying a step) continues
// bit for bit as the uninterrupted run.
func TestDenseResume(t *testing.T) {
	sizes := []int{5, 1, 1009, 64, 0, 300}
	grads := pipelinetest.Normal(sizes, nil)
	const steps = 6
	for _, tc := range []struct {
		name      string
		threshold int
	}{
		{"one buffer", 1 << 20},
		{"buffer per tensor", 4},
		{"small buffers", 4 * 100},
	} {
		for _, world := range []int{2, 4} {
			for _, split := range []int{1, 2, 4} {
				job := pipelinetest.Job{World: world, Sizes: sizes, Steps: steps, Grads: grads, New: denseFactory(tc.threshold)}
				if err := job.CheckResume(split); err != nil {
					t.Errorf("%s, %d ranks, resumed at step %d: %v", tc.name, world, split, err)
				}
			}
		}
	}
}

// TestDenseRestoreRefusesOtherModel: the backprop order of another model is refused with
// an error, not a panic.
func TestDenseRestoreRefusesOtherModel(t *testing.T) {
	res, err := pipelinetest.Job{World: 2, Sizes: []int{5, 1, 1009}, Steps: 2, Grads: pipelinetest.Normal([]int{5, 1, 1009}, nil), New: denseFactory(4 * 100)}.Run()
	if err != nil {
		t.Fatal(err)
	}
	comm := inproc.New(1)[0]
	defer comm.Close()
	p, err := NewDense(comm, pipelinetest.Tensors([]int{5, 1}), 4*100)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.(pipeline.Stateful).Restore(res[0].State); err == nil || !strings.Contains(err.Error(), "3 tensors for 2") {
		t.Errorf("restoring a state of 3 tensors into 2: %v, want an error saying %q", err, "3 tensors for 2")
	}
}

func denseFactory(thresholdBytes int) pipelinetest.Factory {
	return func(comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
		return NewDense(comm, tensors, thresholdBytes)
	}
}
