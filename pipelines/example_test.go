package pipelines_test

import (
	"fmt"
	"sync"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipelines"
)

// average is the smallest pipeline there is: each step, one allreduce per tensor once
// backward has handed over every gradient.
type average struct {
	comm    dist.Communicator
	tensors []pipeline.Tensor
	pushes  *pipeline.Pushes
}

func (p *average) Push(id int, grad []float32) error { return p.pushes.Push(id, grad) }

func (p *average) Wait() error {
	defer p.pushes.Reset()
	if err := p.pushes.Complete(); err != nil {
		return err
	}
	for _, t := range p.tensors {
		if err := p.comm.AllReduce(t.Grad, dist.Average); err != nil {
			return err
		}
	}
	return nil
}

func (p *average) Metrics() pipeline.StepMetrics { return pipeline.StepMetrics{} }
func (p *average) Close() error                  { return nil }

// A new pipeline joins the registry with one call, usually from an init function in its
// own file; train, simulate, `ssfusion pipelines` and the conformance suite then know it.
// Here two in-process ranks build it by name and run one step.
func ExampleRegister() {
	pipelines.Register(pipelines.Spec{
		Name:        "average",
		Description: "one allreduce per tensor at the end of backward",
		Reads:       []string{}, // no option: any set away from its default is refused
		New: func(b pipelines.Build) (pipeline.Pipeline, error) {
			return &average{comm: b.Comm, tensors: b.Tensors, pushes: pipeline.NewPushes(b.Tensors)}, nil
		},
	})
	defer pipelines.Unregister("average")

	settings := pipelines.DefaultSettings()
	settings.Pipeline = "average"
	comms := inproc.New(2)
	results := make([][]float32, 2)
	var wg sync.WaitGroup
	for rank, comm := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer comm.Close()
			tensors := []pipeline.Tensor{{ID: 0, Name: "w", Grad: make([]float32, 3)}}
			p, err := pipelines.New(pipelines.Build{Settings: settings, Comm: comm, Tensors: tensors})
			if err != nil {
				panic(err)
			}
			defer p.Close()
			grad := []float32{float32(rank), 2, 4 * float32(rank)} // what backward produced
			copy(tensors[0].Grad, grad)
			if err := p.Push(0, grad); err != nil {
				panic(err)
			}
			if err := p.Wait(); err != nil {
				panic(err)
			}
			results[rank] = tensors[0].Grad
		}()
	}
	wg.Wait()
	fmt.Println(results[0], results[1])

	settings.Density = 0.05
	fmt.Println(pipelines.Check(settings) != nil)
	// Output:
	// [0.5 2 2] [0.5 2 2]
	// true
}
