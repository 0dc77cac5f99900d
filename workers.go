package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"runtime/pprof"
	"sync"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/dist/mpi"
	"github.com/ssfusion/ssfusion/dist/tcp"
	"github.com/ssfusion/ssfusion/internal/faults"
	"github.com/ssfusion/ssfusion/internal/progress"
	"github.com/ssfusion/ssfusion/trainer"
)

// options runs the training on comm; only a process that logs shows progress.
func options(comm dist.Communicator, logs bool) trainer.Options {
	opts := trainer.Options{Comm: comm}
	if logs {
		opts.Logf = log.New(os.Stderr, "", log.LstdFlags).Printf
		if tty := progress.Terminal(); tty != nil { // a nil *os.File would be a non-nil Writer
			opts.Progress = tty
		}
	}
	return opts
}

// runWorker is one rank of a TCP job: the launcher or a user on each machine started it with
// its rank in the environment.
func runWorker(ctx context.Context, cfg trainer.Config, env tcp.Config) error {
	if cfg.Backend == "inproc" {
		return errors.New("--backend inproc runs all ranks in one process: use it with --workers, not as a worker")
	}
	c, err := cfg.Cable()
	if err != nil {
		return err
	}
	env.BindAddr, env.Timeout, env.Bandwidth, env.Latency = cfg.BindAddr, cfg.Timeout, c.BitsPerSecond, c.Latency
	comm, err := tcp.Dial(ctx, env, transportFaults()...)
	if err != nil {
		return fmt.Errorf("rank %d joining the job: %w", env.Rank, err)
	}
	return trainAs(ctx, cfg, comm)
}

// runMPIWorker is one rank of a job that mpirun started.
func runMPIWorker(ctx context.Context, cfg trainer.Config) error {
	if _, underMPI := os.LookupEnv(tcp.EnvOMPISize); !underMPI && cfg.Workers > 1 {
		return fmt.Errorf("--backend mpi: start the %d workers with mpirun -np %d, from a binary built with -tags mpi", cfg.Workers, cfg.Workers)
	}
	if cfg.Bandwidth != "" || cfg.Latency != "" {
		return errors.New("--bandwidth and --latency emulate links inside the tcp and inproc backends, not under MPI")
	}
	comm, err := mpi.New()
	if err != nil {
		return err
	}
	return trainAs(ctx, cfg, comm)
}

// trainAs trains as comm's rank; rank 0 logs and writes the results.
func trainAs(ctx context.Context, cfg trainer.Config, comm dist.Communicator) error {
	defer comm.Close()
	stop, err := startCPUProfile(comm.Rank())
	if err != nil {
		return err
	}
	defer stop()
	cfg.Workers = comm.Size()
	defer useThreads(cfg)()
	if _, err = trainer.Run(ctx, cfg, options(comm, comm.Rank() == 0)); err != nil || comm.Rank() != 0 {
		return err
	}
	return drawTimeline(cfg)
}

// cpuProfileEnv names a path prefix: each worker process writes a CPU profile of its run to
// <prefix>.rank<N>, for go tool pprof. The launcher hands its environment to the workers, so
// one variable profiles every rank of a job, where the cost of a data-parallel step shows.
const cpuProfileEnv = "SSFUSION_CPU_PROFILE"

// startCPUProfile starts rank's CPU profile when cpuProfileEnv asks for one, and returns
// what stops it.
func startCPUProfile(rank int) (stop func(), err error) {
	prefix := os.Getenv(cpuProfileEnv)
	if prefix == "" {
		return func() {}, nil
	}
	f, err := os.Create(fmt.Sprintf("%s.rank%d", prefix, rank))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// runInProc runs cfg.Workers ranks as goroutines of this process, over in-memory links.
func runInProc(ctx context.Context, cfg trainer.Config) error {
	c, err := cfg.Cable()
	if err != nil {
		return err
	}
	opts := []dist.Option{dist.WithTimeout(cfg.Timeout), dist.WithLatency(c.Latency)}
	if c.Shaped() {
		opts = append(opts, dist.WithBandwidth(c.BitsPerSecond))
	}
	comms := inproc.New(cfg.Workers, opts...)
	defer useThreads(cfg)()
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for rank, comm := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer comm.Close() // lets the other ranks see a failed one
			if _, err := trainer.Run(ctx, cfg, options(comm, rank == 0)); err != nil {
				errs[rank] = fmt.Errorf("rank %d: %w", rank, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return drawTimeline(cfg)
}

// transportFaults arms the transports' fault points that SSF_FAULT names in this process:
// a crash or stop happens inside the transport, at the point; an error resets the rank's
// connections there.
func transportFaults() []dist.Option {
	var armed bool
	for _, p := range dist.FaultPoints() {
		armed = armed || faults.Armed(p.String())
	}
	if !armed {
		return nil
	}
	return []dist.Option{dist.WithFaultHook(func(ev dist.FaultEvent) dist.FaultAction {
		if faults.At(ev.Point.String(), "") != nil {
			return dist.FaultReset
		}
		return dist.FaultNone
	})}
}
