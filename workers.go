package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"

	"golang.org/x/term"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/trainer"
)

// train runs cfg as this process's role in the job: a worker when RANK and WORLD_SIZE (or
// mpirun's variables) are set, the launcher of --workers processes, the N goroutine ranks of
// --backend inproc, or a single process.
func train(ctx context.Context, cfg trainer.Config) error {
	return trainOn(ctx, cfg, placement{nodes: 1})
}

// trainOn is train for a launcher whose workers are one node's of a job spanning nodes.
func trainOn(ctx context.Context, cfg trainer.Config, nodes placement) error {
	switch cfg.Backend {
	case "tcp", "inproc", "mpi":
	default:
		return usage(fmt.Errorf("unknown backend %q (valid: tcp, inproc, mpi)", cfg.Backend))
	}
	// Before any worker starts, rather than once in each.
	if _, err := link(&cfg); err != nil {
		return usage(err)
	}
	if err := checkPipeline(cfg); err != nil {
		return usage(err)
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
	case cfg.Workers > 1 || nodes.nodes > 1:
		if err := beforeLaunch(cfg, cfg.Workers*nodes.nodes); err != nil {
			return err
		}
		launch := dist.LaunchConfig{Workers: cfg.Workers, Args: os.Args[1:], Env: childEnviron(nil)}
		if nodes.nodes > 1 {
			launch.Nodes, launch.NodeRank = nodes.nodes, nodes.nodeRank
			launch.MasterAddr = net.JoinHostPort(nodes.masterAddr, strconv.Itoa(nodes.masterPort))
			launch.Token = os.Getenv(dist.EnvJobToken)
		}
		if tty := progressTerminal(); tty != nil {
			// Rank 0 draws its progress bar on this terminal (or the one `run` handed this
			// launcher), which its prefixed lines would break; it finds it at file
			// descriptor 3.
			launch.RankZeroFiles = []*os.File{tty}
			launch.Env = append(launch.Env, progressFDEnv+"=3")
		}
		return dist.Launch(ctx, launch)
	}
	_, err = trainer.Run(ctx, cfg, options(cfg, nil, true))
	return err
}

// beforeLaunch checks, before the launcher starts a process, what would otherwise fail in
// every worker once all have started: that the results can be written, and that every
// rank's shard of the data fills at least one batch when the job has world ranks in all
// (on every node).
func beforeLaunch(cfg trainer.Config, world int) error {
	cfg.Resolve()
	if cfg.Out == "" {
		cfg.Out = trainer.DefaultOut(&cfg)
	}
	if err := trainer.CheckOut(cfg.Out); err != nil {
		return err
	}
	cfg.Workers = world
	return trainer.CheckData(&cfg)
}

// options wires the pipeline named by cfg to comm; only a process that logs shows progress.
func options(cfg trainer.Config, comm dist.Communicator, logs bool) trainer.Options {
	build := pipelines[cfg.Pipeline]
	opts := trainer.Options{
		Comm: comm,
		NewPipeline: func(cfg *trainer.Config, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
			net, err := planningNetwork(cfg)
			if err != nil {
				return nil, err
			}
			if comm == nil {
				return buildAlone(build, cfg, net, tensors)
			}
			return build(cfg, net, comm, tensors)
		},
	}
	if logs {
		opts.Logf = log.New(os.Stderr, "", log.LstdFlags).Printf
		if tty := progressTerminal(); tty != nil { // a nil *os.File would be a non-nil Writer
			opts.Progress = tty
		}
	}
	return opts
}

// progressFDEnv names, in a worker the launcher started, the file descriptor of the
// launcher's terminal, handed to rank 0 for its progress bar.
const progressFDEnv = "SSFUSION_PROGRESS_FD"

// progressTerminal is where the process that logs draws its progress bar: its own stderr
// when that is a terminal, the launcher's terminal when the launcher handed it one, and
// nowhere (nil) otherwise.
func progressTerminal() *os.File {
	if term.IsTerminal(int(os.Stderr.Fd())) {
		return os.Stderr
	}
	fd, err := strconv.Atoi(os.Getenv(progressFDEnv))
	if err != nil || fd < 3 || !term.IsTerminal(fd) {
		return nil
	}
	return os.NewFile(uintptr(fd), "terminal")
}

// buildAlone builds the pipeline of a single process on a one-rank communicator, which the
// pipeline's Close then closes.
func buildAlone(build newPipeline, cfg *trainer.Config, net *netmodel.Network, tensors []pipeline.Tensor) (pipeline.Pipeline, error) {
	comm := dist.NewInProc(1)[0]
	p, err := build(cfg, net, comm, tensors)
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

// link reads the emulated link, --bandwidth and --latency; unshaped when they are empty.
func link(cfg *trainer.Config) (netmodel.Cable, error) {
	c, err := netmodel.ParseCable(cfg.Bandwidth, cfg.Latency)
	if err != nil {
		return netmodel.Cable{}, fmt.Errorf("emulated link (--bandwidth %q, --latency %q): %w", cfg.Bandwidth, cfg.Latency, err)
	}
	return c, nil
}

// runWorker is one rank of a TCP job: the launcher or a user on each machine started it with
// its rank in the environment.
func runWorker(ctx context.Context, cfg trainer.Config, env dist.TCPConfig) error {
	if cfg.Backend == "inproc" {
		return errors.New("--backend inproc runs all ranks in one process: use it with --workers, not as a worker")
	}
	c, err := link(&cfg)
	if err != nil {
		return err
	}
	env.BindAddr, env.Timeout, env.Bandwidth, env.Latency = cfg.BindAddr, cfg.Timeout, c.BitsPerSecond, c.Latency
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
	stop, err := startCPUProfile(comm.Rank())
	if err != nil {
		return err
	}
	defer stop()
	cfg.Workers = comm.Size()
	_, err = trainer.Run(ctx, cfg, options(cfg, comm, comm.Rank() == 0))
	return err
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
	c, err := link(&cfg)
	if err != nil {
		return err
	}
	opts := []dist.Option{dist.WithTimeout(cfg.Timeout), dist.WithLatency(c.Latency)}
	if c.Shaped() {
		opts = append(opts, dist.WithBandwidth(c.BitsPerSecond))
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
