package tcp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/engine"
	"github.com/ssfusion/ssfusion/dist/shm"
)

// Config describes one rank of a TCP job. See the package documentation for how a
// launcher fills it, and ConfigFromEnv.
type Config struct {
	Rank int // this process's rank, in [0, Size)
	Size int // number of ranks

	// MasterAddr is host:port of rank 0's rendezvous listener. Rank 0 listens on
	// BindAddr with MasterAddr's port, unless it was given Listener; the others dial
	// MasterAddr.
	MasterAddr string
	// Listener, on rank 0 only, is the rendezvous listener, already open at MasterAddr.
	// A launcher that chooses the port opens it and hands it over (launch.Run passes it to
	// rank 0's process as an inherited descriptor, which ConfigFromEnv picks up), so that
	// no other process can take the port between its choice and the rendezvous. Dial
	// takes ownership of it and closes it once the other ranks have joined, or on failure.
	Listener net.Listener
	// BindAddr is the host every listening socket of this rank binds to. Default
	// 127.0.0.1: nothing outside the machine can connect unless told otherwise. A job
	// across machines sets an interface address, or 0.0.0.0.
	BindAddr string
	// AdvertiseAddr is the host peers should dial to reach this rank. Default: BindAddr,
	// or, when BindAddr is a wildcard (0.0.0.0, ::), the local address this rank used
	// to reach the master, which is an address the other machines can route to.
	AdvertiseAddr string
	// Token must be the same on every rank; connections without it are rejected and
	// logged. Empty is allowed, and keeps out only processes with another token.
	Token string

	// Timeout is how long a collective waits on a peer that sends nothing before the
	// job fails (0: dist.DefaultTimeout; negative: never).
	Timeout time.Duration
	// DialTimeout bounds the rendezvous (0: dist.DefaultDialTimeout).
	DialTimeout time.Duration

	// Bandwidth shapes every link, per direction, in bits per second (0: unshaped).
	Bandwidth float64
	// Latency is added once to every frame's delivery.
	Latency time.Duration

	// Logger receives rejected connections and failures (default slog.Default()).
	Logger *slog.Logger
}

const (
	defaultBindAddr  = "127.0.0.1"
	handshakeTimeout = 10 * time.Second
)

// Dial joins the TCP job described by cfg and returns this rank's communicator once
// every rank is connected to every other. opts may tune the engine further (segment
// size, limits); they apply after cfg's fields. It fails if the rendezvous does not
// complete within cfg.DialTimeout or ctx ends.
//
// Rendezvous: rank 0 listens at MasterAddr's port, or on Listener. Every other rank opens
// a listener of its own on BindAddr (ephemeral port), dials rank 0, authenticates, and
// tells rank 0 its advertised address. When all ranks have joined, rank 0 sends everyone the table of
// addresses and keeps each rendezvous connection as its link to that rank. Then each rank
// dials the ranks below it and accepts the ranks above it, every connection with the
// token handshake, forming a full mesh; listeners close once the mesh is complete.
func Dial(ctx context.Context, cfg Config, opts ...dist.Option) (dist.Communicator, error) {
	e, err := dial(ctx, cfg, opts)
	if err != nil {
		return nil, err
	}
	if e.Size() == 1 {
		return e, nil
	}
	return shm.Upgrade(e)
}

// dial is Dial without the move to shared memory.
func dial(ctx context.Context, cfg Config, opts []dist.Option) (*engine.Engine, error) {
	if cfg.Listener != nil {
		// Ours on every path; the rendezvous closes it as soon as the ranks have joined.
		defer cfg.Listener.Close()
	}
	o, err := dist.NewOptions(dist.Options{Timeout: cfg.Timeout, Bandwidth: cfg.Bandwidth, Latency: cfg.Latency, Logger: cfg.Logger}, opts...)
	if err != nil {
		return nil, err
	}
	if cfg.Size < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.Size {
		return nil, fmt.Errorf("dist: rank %d of world size %d: want 0 <= rank < size", cfg.Rank, cfg.Size)
	}
	if cfg.Listener != nil && cfg.Rank != 0 {
		return nil, fmt.Errorf("dist: rank %d was given a rendezvous listener, which only rank 0 accepts on", cfg.Rank)
	}
	if cfg.Size == 1 {
		return engine.New(0, 1, nil, o), nil
	}
	if _, _, err := net.SplitHostPort(cfg.MasterAddr); err != nil && cfg.Listener == nil {
		return nil, fmt.Errorf("dist: master address %q: want host:port (MASTER_ADDR, MASTER_PORT): %w", cfg.MasterAddr, err)
	}
	if cfg.BindAddr == "" {
		cfg.BindAddr = defaultBindAddr
	}
	dt := cfg.DialTimeout
	if dt <= 0 {
		dt = dist.DefaultDialTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, dt)
	defer cancel()
	rv := &rendezvous{cfg: cfg, log: o.Logger}
	conns, err := rv.run(ctx)
	if err != nil {
		return nil, err
	}
	return engine.New(cfg.Rank, cfg.Size, conns, o), nil
}
