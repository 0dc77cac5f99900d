package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/ssfusion/ssfusion/dist/launch"
	"github.com/ssfusion/ssfusion/dist/tcp"
	"github.com/ssfusion/ssfusion/internal/parallel"
	"github.com/ssfusion/ssfusion/internal/progress"
	"github.com/ssfusion/ssfusion/plots"
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
	if _, err := cfg.Cable(); err != nil {
		return usage(err)
	}
	if err := trainer.CheckPipeline(cfg); err != nil {
		return usage(err)
	}
	if cfg.Backend == "mpi" {
		return runMPIWorker(ctx, cfg)
	}
	env, err := tcp.ConfigFromEnv()
	switch {
	case err == nil:
		return runWorker(ctx, cfg, env)
	case !errors.Is(err, tcp.ErrNoEnv):
		return err
	case cfg.Workers > 1 && cfg.Backend == "inproc":
		return runInProc(ctx, cfg)
	case cfg.Workers > 1 || nodes.nodes > 1:
		return launchWorkers(ctx, cfg, nodes)
	}
	defer useThreads(cfg)()
	if _, err = trainer.Run(ctx, cfg, options(nil, true)); err != nil {
		return err
	}
	return drawTimeline(cfg)
}

// drawTimeline draws the timeline that rank 0 recorded with --timeline-steps next to it.
func drawTimeline(cfg trainer.Config) error {
	if cfg.TimelineSteps <= 0 {
		return nil
	}
	out := cfg.Out
	if out == "" {
		out = trainer.DefaultOut(&cfg)
	}
	title := fmt.Sprintf("rank 0's last %d steps: %s, %s, %d workers", cfg.TimelineSteps, cfg.Pipeline, cfg.Model, cfg.Workers)
	return plots.Timeline(filepath.Join(out, trainer.TimelineFile), filepath.Join(out, "timeline.png"), title)
}

// useThreads applies --threads and --compute-threads to this process, which trains, and
// returns what restores the settings it found.
func useThreads(cfg trainer.Config) (restore func()) {
	procs := runtime.GOMAXPROCS(0)
	if cfg.Threads > 0 {
		runtime.GOMAXPROCS(cfg.Threads)
	}
	computeLimit := parallel.SetLimit(cfg.ComputeThreads)
	return func() {
		runtime.GOMAXPROCS(procs)
		parallel.SetLimit(computeLimit)
	}
}

// launchWorkers starts this node's cfg.Workers processes of a job, each running this
// command as one rank, once what would fail in every one of them has been checked here.
func launchWorkers(ctx context.Context, cfg trainer.Config, nodes placement) error {
	if err := trainer.CheckJob(cfg, cfg.Workers*nodes.nodes); err != nil {
		return err
	}
	// A launcher of node 0 may be handed the rendezvous listener, as it hands it to
	// rank 0, so that the port stays taken from its choice to the rendezvous.
	master, err := tcp.ListenerFromEnv()
	if err != nil {
		return err
	}
	job := launch.Config{Workers: cfg.Workers, Args: os.Args[1:], Env: childEnviron(nil), MasterListener: master, Threads: cfg.Threads}
	if nodes.nodes > 1 {
		job.Nodes, job.NodeRank = nodes.nodes, nodes.nodeRank
		job.MasterAddr = net.JoinHostPort(nodes.masterAddr, strconv.Itoa(nodes.masterPort))
		job.Token = os.Getenv(tcp.EnvJobToken)
	}
	if tty := progress.Terminal(); tty != nil {
		// Rank 0 draws its progress bar on this terminal (or the one `run` handed this
		// launcher), which its prefixed lines would break; it finds it at file
		// descriptor 3.
		job.RankZeroFiles = []*os.File{tty}
		job.Env = append(job.Env, progress.FDEnv+"=3")
	}
	return launch.Run(ctx, job)
}

// placement is where this launcher's workers sit in a job that spans machines, as
// torchrun's --nnodes, --node-rank, --master-addr and --master-port put them; one node
// by default.
type placement struct {
	nodes, nodeRank int
	masterAddr      string
	masterPort      int
}

// check reports a placement that cannot form a job.
func (p placement) check() error {
	switch {
	case p.nodes < 1:
		return fmt.Errorf("--nnodes %d: want at least 1", p.nodes)
	case p.nodeRank < 0 || p.nodeRank >= p.nodes:
		return fmt.Errorf("--node-rank %d: want 0 to %d for %d nodes", p.nodeRank, p.nodes-1, p.nodes)
	case p.nodes == 1:
		return nil
	case p.masterAddr == "":
		return fmt.Errorf("--nnodes %d needs --master-addr, the host of node 0", p.nodes)
	case p.masterPort < 1 || p.masterPort > 65535:
		return fmt.Errorf("--master-port %d: want a port from 1 to 65535", p.masterPort)
	case os.Getenv(tcp.EnvJobToken) == "":
		return fmt.Errorf("--nnodes %d needs the same secret in %s on every node, which admits the workers to the job", p.nodes, tcp.EnvJobToken)
	}
	return nil
}
