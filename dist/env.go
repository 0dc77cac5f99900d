package dist

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
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

// ConfigFromEnv reads a worker's TCPConfig from the environment: RANK and WORLD_SIZE
// (falling back to OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE), MASTER_ADDR and
// MASTER_PORT (required when WORLD_SIZE > 1) and SSF_JOB_TOKEN. The other fields keep
// their defaults; the caller sets BindAddr, Timeout, Bandwidth ... from its own flags.
func ConfigFromEnv() (TCPConfig, error) { return configFromEnv(os.LookupEnv) }

func configFromEnv(lookup func(string) (string, bool)) (TCPConfig, error) {
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
		return TCPConfig{}, ErrNoEnv
	case !rok:
		return TCPConfig{}, fmt.Errorf("dist: %s is set but %s is not", sname, rname)
	case !sok:
		return TCPConfig{}, fmt.Errorf("dist: %s is set but %s is not", rname, sname)
	}
	rank, err := strconv.Atoi(strings.TrimSpace(rs))
	if err != nil {
		return TCPConfig{}, fmt.Errorf("dist: %s=%q: not an integer", rname, rs)
	}
	size, err := strconv.Atoi(strings.TrimSpace(ss))
	if err != nil {
		return TCPConfig{}, fmt.Errorf("dist: %s=%q: not an integer", sname, ss)
	}
	if size < 1 || rank < 0 || rank >= size {
		return TCPConfig{}, fmt.Errorf("dist: %s=%d, %s=%d: want 0 <= rank < size", rname, rank, sname, size)
	}
	cfg := TCPConfig{Rank: rank, Size: size}
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
			return TCPConfig{}, fmt.Errorf("dist: world size %d needs %s", size, strings.Join(missing, " and "))
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return TCPConfig{}, fmt.Errorf("dist: %s=%q: want a port number in [1, 65535]", EnvMasterPort, port)
		}
		cfg.MasterAddr = net.JoinHostPort(host, port)
	}
	return cfg, nil
}

// Environ returns the variables that give a child process this config's rank, world size,
// master and token through ConfigFromEnv (LOCAL_RANK is set to the rank, as on one
// machine). A launcher appends them to os.Environ() for each worker.
func (c TCPConfig) Environ() []string {
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

// FreeAddr returns host:port with a port that was free on host a moment ago, for a
// launcher to pass as MASTER_ADDR and MASTER_PORT. Another process may take the port in
// between; rank 0's DialTCP then fails and says so.
func FreeAddr(host string) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("dist: find a free port on %s: %w", host, err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
