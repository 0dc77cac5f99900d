package tcp

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// The environment of a worker process (torchrun's names, plus the job token).
const (
	EnvRank       = "RANK"
	EnvWorldSize  = "WORLD_SIZE"
	EnvLocalRank  = "LOCAL_RANK"
	EnvMasterAddr = "MASTER_ADDR"
	EnvMasterPort = "MASTER_PORT"
	EnvJobToken   = "SSF_JOB_TOKEN"
	// EnvMasterFD, set by a launcher for rank 0 alone, is the number of an inherited file
	// descriptor that is rank 0's rendezvous listener, already open at MASTER_PORT (see
	// InheritListener).
	EnvMasterFD = "SSF_MASTER_FD"
	// Set by Open MPI's mpirun, by SLURM's srun, and by launchers of the PMI interface
	// (MPICH's Hydra, Intel MPI); read, in that order, when RANK and WORLD_SIZE are absent.
	EnvOMPIRank  = "OMPI_COMM_WORLD_RANK"
	EnvOMPISize  = "OMPI_COMM_WORLD_SIZE"
	EnvSLURMRank = "SLURM_PROCID"
	EnvSLURMSize = "SLURM_NTASKS"
	EnvPMIRank   = "PMI_RANK"
	EnvPMISize   = "PMI_SIZE"
)

// rankVars and sizeVars are the variables a worker's rank and the world size are read
// from, in order of preference, pairwise: a launcher sets both of a pair.
var (
	rankVars = []string{EnvRank, EnvOMPIRank, EnvSLURMRank, EnvPMIRank}
	sizeVars = []string{EnvWorldSize, EnvOMPISize, EnvSLURMSize, EnvPMISize}
)

// ErrNoEnv: the process was not started as a worker (neither RANK and WORLD_SIZE nor
// the Open MPI variables are set). A launcher uses it to decide to launch workers.
var ErrNoEnv = errors.New("dist: not started as a worker: RANK and WORLD_SIZE (or mpirun's, srun's or PMI's rank and size) are not set")

// ConfigFromEnv reads a worker's Config from the environment: RANK and WORLD_SIZE
// (falling back to OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE), MASTER_ADDR and
// MASTER_PORT (required when WORLD_SIZE > 1) and SSF_JOB_TOKEN. The other fields keep
// their defaults; the caller sets BindAddr, Timeout, Bandwidth ... from its own flags.
//
// On rank 0, SSF_MASTER_FD names the inherited rendezvous listener, which becomes
// Listener. ConfigFromEnv takes the descriptor over and removes the variable from the
// environment, so that the processes this one starts do not look for a descriptor that
// is not theirs.
func ConfigFromEnv() (Config, error) {
	cfg, err := configFromEnv(os.LookupEnv)
	if err != nil {
		return Config{}, err
	}
	fd, ok, err := masterFD(os.LookupEnv, cfg.Rank)
	if err != nil || !ok {
		return cfg, err
	}
	if cfg.Listener, err = adoptListener(fd); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// ListenerFromEnv returns the rendezvous listener that this process inherited (see
// InheritListener), or nil if EnvMasterFD is not set. It is for a launcher of the node
// that runs rank 0, which passes the listener on to rank 0; ConfigFromEnv does the same
// for a worker. Either removes EnvMasterFD from the environment.
func ListenerFromEnv() (net.Listener, error) {
	fd, ok, err := masterFD(os.LookupEnv, 0)
	if err != nil || !ok {
		return nil, err
	}
	return adoptListener(fd)
}

// adoptListener turns the inherited descriptor fd into a listener and removes
// EnvMasterFD from the environment, so that the processes this one starts do not look
// for a descriptor that is not theirs.
func adoptListener(fd int) (net.Listener, error) {
	os.Unsetenv(EnvMasterFD)
	f := os.NewFile(uintptr(fd), "rendezvous listener")
	// FileListener works on a duplicate that is closed on exec; the inherited descriptor
	// is not, so it is closed here rather than passed on to this process's children.
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("dist: %s=%d: not a listening socket: %w", EnvMasterFD, fd, err)
	}
	return ln, nil
}

// masterFD reads EnvMasterFD: the descriptor of rank 0's inherited listener, if it is
// set and not empty.
func masterFD(lookup func(string) (string, bool), rank int) (fd int, ok bool, err error) {
	v, _ := lookup(EnvMasterFD)
	if v == "" {
		return 0, false, nil
	}
	if rank != 0 {
		return 0, false, fmt.Errorf("dist: %s is set for rank %d: only rank 0 accepts the rendezvous", EnvMasterFD, rank)
	}
	fd, err = strconv.Atoi(strings.TrimSpace(v))
	if err != nil || fd < 3 {
		return 0, false, fmt.Errorf("dist: %s=%q: want the number of an inherited descriptor (3 or more)", EnvMasterFD, v)
	}
	return fd, true, nil
}

func configFromEnv(lookup func(string) (string, bool)) (Config, error) {
	// The first pair of which either variable is set decides, so that a rank and a size
	// never come from two launchers.
	var rs, rname, ss, sname string
	var rok, sok bool
	for i := range rankVars {
		rs, rok = lookup(rankVars[i])
		ss, sok = lookup(sizeVars[i])
		rname, sname = rankVars[i], sizeVars[i]
		if rok || sok {
			break
		}
	}
	switch {
	case !rok && !sok:
		return Config{}, ErrNoEnv
	case !rok:
		return Config{}, fmt.Errorf("dist: %s is set but %s is not", sname, rname)
	case !sok:
		return Config{}, fmt.Errorf("dist: %s is set but %s is not", rname, sname)
	}
	rank, err := strconv.Atoi(strings.TrimSpace(rs))
	if err != nil {
		return Config{}, fmt.Errorf("dist: %s=%q: not an integer", rname, rs)
	}
	size, err := strconv.Atoi(strings.TrimSpace(ss))
	if err != nil {
		return Config{}, fmt.Errorf("dist: %s=%q: not an integer", sname, ss)
	}
	if size < 1 || rank < 0 || rank >= size {
		return Config{}, fmt.Errorf("dist: %s=%d, %s=%d: want 0 <= rank < size", rname, rank, sname, size)
	}
	cfg := Config{Rank: rank, Size: size}
	cfg.Token, _ = lookup(EnvJobToken)
	host, hok := lookup(EnvMasterAddr)
	port, pok := lookup(EnvMasterPort)
	if size > 1 {
		var missing []string
		if !hok || host == "" {
			missing = append(missing, EnvMasterAddr)
		}
		if !pok || port == "" {
			missing = append(missing, EnvMasterPort)
		}
		if len(missing) > 0 {
			return Config{}, fmt.Errorf("dist: world size %d needs %s", size, strings.Join(missing, " and "))
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return Config{}, fmt.Errorf("dist: %s=%q: want a port number in [1, 65535]", EnvMasterPort, port)
		}
		cfg.MasterAddr = net.JoinHostPort(host, port)
	}
	return cfg, nil
}

// Environ returns the variables that give a child process this config's rank, world size,
// master and token through ConfigFromEnv (LOCAL_RANK is set to the rank, as on one
// machine). A launcher appends them to os.Environ() for each worker.
func (c Config) Environ() []string {
	host, port, _ := net.SplitHostPort(c.MasterAddr)
	return []string{
		EnvRank + "=" + strconv.Itoa(c.Rank),
		EnvWorldSize + "=" + strconv.Itoa(c.Size),
		EnvLocalRank + "=" + strconv.Itoa(c.Rank),
		EnvMasterAddr + "=" + host,
		EnvMasterPort + "=" + port,
		EnvJobToken + "=" + c.Token,
	}
}

// NewJobToken returns a random token for SSF_JOB_TOKEN.
func NewJobToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// InheritListener arranges for cmd, a worker about to be started as rank 0, to inherit
// ln as its rendezvous listener: it appends a duplicate of ln's descriptor to
// cmd.ExtraFiles and names it in cmd.Env (EnvMasterFD), where ConfigFromEnv finds it. A
// nil cmd.Env is filled with os.Environ() first. The caller closes the returned file once
// cmd has started (the child holds its own copy) and may then close ln too: the port
// stays taken, by one process or the other, from the moment ln was opened until rank 0's
// rendezvous ends, so no other process can take it in between.
func InheritListener(cmd *exec.Cmd, ln net.Listener) (*os.File, error) {
	fl, ok := ln.(interface{ File() (*os.File, error) })
	if !ok {
		return nil, fmt.Errorf("dist: hand the rendezvous listener to a worker: a %T has no file descriptor", ln)
	}
	f, err := fl.File()
	if err != nil {
		return nil, fmt.Errorf("dist: hand the rendezvous listener to a worker: %w", err)
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.ExtraFiles = append(slices.Clip(cmd.ExtraFiles), f) // never into the caller's array
	cmd.Env = append(cmd.Env, EnvMasterFD+"="+strconv.Itoa(2+len(cmd.ExtraFiles)))
	return f, nil
}
