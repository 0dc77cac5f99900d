package trainer

import (
	"errors"
	"fmt"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipelines"
)

// NewPipeline builds, through the registry of package pipelines, the pipeline cfg names
// for tensors on comm. A nil comm is a single process, which gets a one-rank communicator
// of its own (closed with the pipeline) so that selection and error feedback apply there
// as in a job.
func NewPipeline(cfg *Config, comm dist.Communicator, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
	net, err := PlanningNetwork(cfg)
	if err != nil {
		return nil, err
	}
	b := pipelines.Build{Settings: cfg.Settings, Seed: uint64(cfg.Seed), Momentum: cfg.Momentum, Network: net, Tensors: tensors}
	if comm != nil {
		b.Comm = comm
		return pipelines.New(b)
	}
	b.Comm = inproc.New(1)[0]
	p, err := pipelines.New(b)
	if err != nil {
		b.Comm.Close()
		return nil, err
	}
	return closeBoth{p, b.Comm}, nil
}

// CheckPipeline builds the pipeline cfg names on a one-rank communicator and a toy tensor,
// and closes it, so that a setting the pipeline refuses is found before any worker starts
// rather than in each of them once all have.
func CheckPipeline(cfg Config) error {
	cfg.Resolve()
	tensors := []pipeline.Tensor{{ID: 0, Name: "w", Dims: 2, Shape: []int{8, 8}, Grad: make([]float32, 64)}}
	p, err := NewPipeline(&cfg, nil, tensors)
	if err != nil {
		return err
	}
	return p.Close()
}

// Cable is the emulated link of cfg (--bandwidth, --latency); unshaped when neither is set.
func (c *Config) Cable() (netmodel.Cable, error) {
	cable, err := netmodel.ParseCable(c.Bandwidth, c.Latency)
	if err != nil {
		return netmodel.Cable{}, fmt.Errorf("emulated link (--bandwidth %q, --latency %q): %w", c.Bandwidth, c.Latency, err)
	}
	return cable, nil
}

// PlanningNetwork is the network the planners plan with in training: a flat network of
// the link the cost keys give when cost-beta is set, else what the transport makes of the
// emulated link when there is one, else none (nil): SSFusion then sparsifies by its rule
// alone (the cost rule refuses to run) and SAFusion plans for its default network. The
// simulator gives them the simulated network instead.
func PlanningNetwork(cfg *Config) (*netmodel.Network, error) {
	switch {
	case cfg.CostBeta > 0:
		return &netmodel.Network{Inter: netmodel.Link{Alpha: cfg.CostAlpha, Beta: cfg.CostBeta}}, nil
	case cfg.CostAlpha != 0:
		return nil, fmt.Errorf("--cost-alpha %g without --cost-beta: the cost flags give a link's two constants together", cfg.CostAlpha)
	}
	c, err := cfg.Cable()
	if err != nil || !c.Shaped() {
		return nil, err
	}
	net := c.Network()
	return &net, nil
}

// closeBoth is a pipeline that also owns its communicator.
type closeBoth struct {
	pipeline.Pipeline
	comm dist.Communicator
}

func (c closeBoth) Close() error { return errors.Join(c.Pipeline.Close(), c.comm.Close()) }

// State implements pipeline.Stateful for the pipeline inside, which may keep no state.
func (c closeBoth) State() (pipeline.State, error) {
	if s, ok := c.Pipeline.(pipeline.Stateful); ok {
		return s.State()
	}
	return pipeline.State{}, nil
}

// Restore implements pipeline.Stateful for the pipeline inside.
func (c closeBoth) Restore(st pipeline.State) error {
	if s, ok := c.Pipeline.(pipeline.Stateful); ok {
		return s.Restore(st)
	}
	if st.Residuals != nil || st.Momenta != nil {
		return errors.New("the pipeline keeps no state, the checkpoint holds some")
	}
	return nil
}
