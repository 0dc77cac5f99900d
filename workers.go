package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/trainer"
)

// train runs cfg as this process's role in the job: a worker when RANK and WORLD_SIZE (or
// mpirun's variables) are set, the launcher of --workers processes, the N goroutine ranks of
// --backend inproc, or a single process.
func train(ctx context.Context, cfg trainer.Config) error {
	switch cfg.Backend {
	case "tcp", "inproc", "mpi":
	default:
		return fmt.Errorf("unknown backend %q (valid: tcp, inproc, mpi)", cfg.Backend)
	}
	if _, _, err := link(cfg); err != nil {
		return err // before any worker starts, rather than once in each
	}
	if cfg.Backend == "mpi" {
		return runMPIWorker(ctx, cfg)
	}
	env, err := dist.ConfigFromEnv()
	switch {
	case err == nil:
		return runWorker(ctx, cfg, env)
	case !errors.Is(err, dist.ErrNoEnv):
		return err
	case cfg.Workers > 1 && cfg.Backend == "inproc":
		return runInProc(ctx, cfg)
	case cfg.Workers > 1:
		return dist.Launch(ctx, dist.LaunchConfig{Workers: cfg.Workers, Args: os.Args[1:]})
	}
	_, err = trainer.Run(ctx, cfg, options(cfg, nil, true))
	return err
}

// options wires the pipeline named by cfg to comm; only a process that logs shows progress.
func options(cfg trainer.Config, comm dist.Communicator, logs bool) trainer.Options {
	build := pipelines[cfg.Pipeline]
	opts := trainer.Options{
		Comm: comm,
		NewPipeline: func(cfg *trainer.Config, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
			if comm == nil {
				return buildAlone(build, cfg, tensors)
			}
			return build(cfg, comm, tensors)
		},
	}
	if logs {
		opts.Logf = log.New(os.Stderr, "", log.LstdFlags).Printf
		if term.IsTerminal(int(os.Stderr.Fd())) {
			opts.Progress = os.Stderr
		}
	}
	return opts
}

// buildAlone builds the pipeline of a single process on a one-rank communicator, which the
// pipeline's Close then closes.
func buildAlone(build newPipeline, cfg *trainer.Config, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
	comm := dist.NewInProc(1)[0]
	p, err := build(cfg, comm, tensors)
	if err != nil {
		comm.Close()
		return nil, err
	}
	return closeBoth{p, comm}, nil
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

// Restore implements pipeline.Stateful.
func (c closeBoth) Restore(st pipeline.State) error {
	if s, ok := c.Pipeline.(pipeline.Stateful); ok {
		return s.Restore(st)
	}
	if st.Residuals != nil || st.Momenta != nil {
		return errors.New("the pipeline keeps no state, the checkpoint holds some")
	}
	return nil
}

// link turns the link-emulation and failure flags into communicator options.
func link(cfg trainer.Config) (bandwidth float64, latency time.Duration, err error) {
	if bandwidth, err = dist.ParseBandwidth(cfg.Bandwidth); err != nil {
		return 0, 0, fmt.Errorf("--bandwidth: %w", err)
	}
	if cfg.Latency != "" {
		if latency, err = time.ParseDuration(cfg.Latency); err != nil || latency < 0 {
			return 0, 0, fmt.Errorf("--latency %q: want a duration such as 100us or 2ms", cfg.Latency)
		}
	}
	return bandwidth, latency, nil
}

// runWorker is one rank of a TCP job: the launcher or a user on each machine started it with
// its rank in the environment.
func runWorker(ctx context.Context, cfg trainer.Config, env dist.TCPConfig) error {
	if cfg.Backend == "inproc" {
		return errors.New("--backend inproc runs all ranks in one process: use it with --workers, not as a worker")
	}
	bandwidth, latency, err := link(cfg)
	if err != nil {
		return err
	}
	env.BindAddr, env.Timeout, env.Bandwidth, env.Latency = cfg.BindAddr, cfg.Timeout, bandwidth, latency
	comm, err := dist.DialTCP(ctx, env)
	if err != nil {
		return fmt.Errorf("rank %d joining the job: %w", env.Rank, err)
	}
	return trainAs(ctx, cfg, comm)
}

// runMPIWorker is one rank of a job that mpirun started.
func runMPIWorker(ctx context.Context, cfg trainer.Config) error {
	if _, underMPI := os.LookupEnv(dist.EnvOMPISize); !underMPI && cfg.Workers > 1 {
		return fmt.Errorf("--backend mpi: start the %d workers with mpirun -np %d, from a binary built with -tags mpi", cfg.Workers, cfg.Workers)
	}
	if cfg.Bandwidth != "" || cfg.Latency != "" {
		return errors.New("--bandwidth and --latency emulate links inside the tcp and inproc backends, not under MPI")
	}
	comm, err := dist.NewMPI()
	if err != nil {
		return err
	}
	return trainAs(ctx, cfg, comm)
}

// trainAs trains as comm's rank; rank 0 logs and writes the results.
func trainAs(ctx context.Context, cfg trainer.Config, comm dist.Communicator) error {
	defer comm.Close()
	cfg.Workers = comm.Size()
	_, err := trainer.Run(ctx, cfg, options(cfg, comm, comm.Rank() == 0))
	return err
}

// runInProc runs cfg.Workers ranks as goroutines of this process, over in-memory links.
func runInProc(ctx context.Context, cfg trainer.Config) error {
	bandwidth, latency, err := link(cfg)
	if err != nil {
		return err
	}
	opts := []dist.Option{dist.WithTimeout(cfg.Timeout), dist.WithLatency(latency)}
	if bandwidth > 0 {
		opts = append(opts, dist.WithBandwidth(bandwidth))
	}
	comms := dist.NewInProc(cfg.Workers, opts...)
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for rank, comm := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer comm.Close() // lets the other ranks see a failed one
			if _, err := trainer.Run(ctx, cfg, options(cfg, comm, rank == 0)); err != nil {
				errs[rank] = fmt.Errorf("rank %d: %w", rank, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
