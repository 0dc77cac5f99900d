// Package pipelinetest runs gradient pipelines on in-process ranks with synthetic
// gradients, for the tests of the packages that implement pipelines.
package pipelinetest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/pipeline"
)

// Tensors returns tensors of the given sizes with ids 0, 1, ...
func Tensors(sizes []int) []pipeline.Tensor {
	ts := make([]pipeline.Tensor, len(sizes))
	for i, n := range sizes {
		ts[i] = pipeline.Tensor{ID: i, Name: fmt.Sprintf("t%d", i), Grad: make([]float32, n)}
	}
	return ts
}

// Normal returns a gradient source: tensor i of rank r in step s is standard normal noise
// times scale[i] (1 when scale is short), the same for the same (r, s).
func Normal(sizes []int, scale []float32) func(rank, step int) [][]float32 {
	return func(rank, step int) [][]float32 {
		rng := rand.New(rand.NewPCG(uint64(rank)+1, uint64(step)+1))
		out := make([][]float32, len(sizes))
		for i, n := range sizes {
			sc := float32(1)
			if i < len(scale) {
				sc = scale[i]
			}
			out[i] = make([]float32, n)
			for j := range out[i] {
				out[i][j] = float32(rng.NormFloat64()) * sc
			}
		}
		return out
	}
}

// Factory builds the pipeline of one rank.
type Factory = pipeline.Factory

// Result is what one rank saw: the aggregated gradients after each step's Wait, by step
// and tensor, each step's metrics, and, for a pipeline.Stateful, its state after the
// last step.
type Result struct {
	Grads   [][][]float32
	Metrics []pipeline.StepMetrics
	State   pipeline.State
	// Stats are what the rank's communicator counted over the steps, from the first
	// Push to the last Wait.
	Stats dist.Stats
}

// Run runs steps steps of the pipeline on world in-process ranks. Each step every rank
// pushes its gradients from grads in the backprop order order (all tensors when nil,
// last first) and waits. It returns every rank's results, and the errors of the ranks
// that failed, each with its rank.
func Run(world int, sizes, order []int, steps int, grads func(rank, step int) [][]float32, newPipe Factory, opts ...dist.Option) ([]Result, error) {
	return Job{World: world, Sizes: sizes, Order: order, Steps: steps, Grads: grads, New: newPipe, Options: opts}.Run()
}

// Job is Run with every setting named, and two more: tensors with shapes, and ranks that
// resume from saved states.
type Job struct {
	World   int
	Sizes   []int                    // the tensors' sizes, when Tensors is nil
	Tensors func() []pipeline.Tensor // builds one rank's tensors, ids 0, 1, ...
	Order   []int                    // backprop order; nil: last tensor first
	Steps   int
	Grads   func(rank, step int) [][]float32
	New     Factory
	// Restore, when set, is every rank's state to start from; steps then count on from
	// the state's.
	Restore []pipeline.State
	// Start is the first step's number when there is nothing to restore: a pipeline
	// that keeps no state resumes as a fresh one, at the step the run had reached.
	Start   int
	Options []dist.Option
}

// Run runs the job; see Run.
func (j Job) Run() ([]Result, error) {
	if j.Tensors == nil {
		j.Tensors = func() []pipeline.Tensor { return Tensors(j.Sizes) }
	}
	if j.Order == nil {
		for i := len(j.Tensors()) - 1; i >= 0; i-- {
			j.Order = append(j.Order, i)
		}
	}
	comms := inproc.New(j.World, j.Options...)
	results := make([]Result, j.World)
	errs := make([]error, j.World)
	var wg sync.WaitGroup
	for r := range j.World {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer comms[r].Close()
			results[r], errs[r] = j.runRank(comms[r])
		}()
	}
	wg.Wait()
	// Every rank's error: which rank fails first, and with the cause or with its peer's
	// departure, is a race between them.
	var failed []error
	for r, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Errorf("rank %d: %w", r, err))
		}
	}
	return results, errors.Join(failed...)
}

func (j Job) runRank(comm dist.Communicator) (Result, error) {
	var res Result
	tensors := j.Tensors()
	p, err := j.New(comm, tensors)
	if err != nil {
		return res, err
	}
	defer p.Close()
	first := j.Start
	if j.Restore != nil {
		st, ok := p.(pipeline.Stateful)
		if !ok {
			return res, fmt.Errorf("restore: %T keeps no state", p)
		}
		if err := st.Restore(j.Restore[comm.Rank()]); err != nil {
			return res, err
		}
		first = int(j.Restore[comm.Rank()].Steps)
	}
	before := comm.Stats()
	for s := first; s < first+j.Steps; s++ {
		g := j.Grads(comm.Rank(), s)
		for _, t := range tensors {
			copy(t.Grad, g[t.ID]) // what backward leaves in the parameters' gradients
		}
		for _, id := range j.Order {
			// The pipeline must copy what it needs: hand it a buffer that is
			// overwritten right after the call, as the model's hook does.
			tmp := append([]float32(nil), g[id]...)
			if err := p.Push(id, tmp); err != nil {
				return res, fmt.Errorf("step %d, push of tensor %d: %w", s, id, err)
			}
			for i := range tmp {
				tmp[i] = 12345
			}
		}
		if err := p.Wait(); err != nil {
			return res, fmt.Errorf("step %d: %w", s, err)
		}
		step := make([][]float32, len(tensors))
		for i, t := range tensors {
			step[i] = append([]float32(nil), t.Grad...)
		}
		res.Grads = append(res.Grads, step)
		res.Metrics = append(res.Metrics, p.Metrics())
	}
	res.Stats = comm.Stats().Sub(before)
	if st, ok := p.(pipeline.Stateful); ok {
		res.State, err = st.State()
	}
	return res, err
}

// Mean is the average over ranks of the gradients grads produces in step s: what a
// dense pipeline yields.
func Mean(world, step int, grads func(rank, step int) [][]float32) [][]float64 {
	var out [][]float64
	for r := range world {
		g := grads(r, step)
		if out == nil {
			out = make([][]float64, len(g))
			for i := range g {
				out[i] = make([]float64, len(g[i]))
			}
		}
		for i := range g {
			for j, v := range g[i] {
				out[i][j] += float64(v) / float64(world)
			}
		}
	}
	return out
}

// CheckMean reports the first gradient of res, on any rank and step, that differs from the
// average over ranks of what grads produced by more than tol: what every pipeline must
// yield when it sends everything.
func CheckMean(res []Result, grads func(rank, step int) [][]float32, tol float64) error {
	for s := range res[0].Grads {
		want := Mean(len(res), s, grads)
		for r := range res {
			for i := range want {
				for j, w := range want[i] {
					if got := res[r].Grads[s][i][j]; math.Abs(float64(got)-w) > tol {
						return fmt.Errorf("rank %d, step %d, tensor %d[%d]: %g, dense average %g", r, s, i, j, got, w)
					}
				}
			}
		}
	}
	return nil
}

// CheckSame reports the first gradient, on any rank and step, whose bits differ between two
// runs of the same job: what two pipelines that must select and add alike have to give.
func CheckSame(got, want []Result) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d ranks, want %d", len(got), len(want))
	}
	for r := range want {
		if err := sameGrads(got[r].Grads, want[r].Grads); err != nil {
			return fmt.Errorf("rank %d, %w", r, err)
		}
	}
	return nil
}

// CheckRanksAgree reports the first gradient, on any rank and step, whose bits differ from
// rank 0's: every rank must end every step with the same parameters.
func CheckRanksAgree(res []Result) error {
	for r := 1; r < len(res); r++ {
		if err := sameGrads(res[r].Grads, res[0].Grads); err != nil {
			return fmt.Errorf("rank %d differs from rank 0: %w", r, err)
		}
	}
	return nil
}

// sameGrads reports the first element, by step, tensor and index, of got that is not bit
// for bit want's, or is NaN (which no comparison should let pass for equal).
func sameGrads(got, want [][][]float32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d steps, want %d", len(got), len(want))
	}
	for s := range want {
		for i := range want[s] {
			if len(got[s][i]) != len(want[s][i]) {
				return fmt.Errorf("step %d, tensor %d: %d elements, want %d", s, i, len(got[s][i]), len(want[s][i]))
			}
			for j, w := range want[s][i] {
				if g := got[s][i][j]; math.Float32bits(g) != math.Float32bits(w) || g != g {
					return fmt.Errorf("step %d, tensor %d[%d]: %g, want %g", s, i, j, g, w)
				}
			}
		}
	}
	return nil
}
