package tcp

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestConfigFromEnv(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want Config
		err  string
	}{
		{"torchrun", map[string]string{"RANK": "2", "WORLD_SIZE": "4", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "SSF_JOB_TOKEN": "abc"},
			Config{Rank: 2, Size: 4, MasterAddr: "10.0.0.1:29500", Token: "abc"}, ""},
		{"ipv6 master", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "::1", "MASTER_PORT": "1234"},
			Config{Rank: 0, Size: 2, MasterAddr: "[::1]:1234"}, ""},
		{"open mpi", map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "5"},
			Config{Rank: 1, Size: 2, MasterAddr: "h:5"}, ""},
		{"srun", map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "MASTER_ADDR": "n0", "MASTER_PORT": "29500"},
			Config{Rank: 3, Size: 8, MasterAddr: "n0:29500"}, ""},
		{"pmi", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "5"},
			Config{Rank: 1, Size: 2, MasterAddr: "h:5"}, ""},
		{"Open MPI wins over srun", map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1", "SLURM_PROCID": "5", "SLURM_NTASKS": "6"},
			Config{Rank: 0, Size: 1}, ""},
		{"srun's rank without its size", map[string]string{"SLURM_PROCID": "1"}, Config{}, "SLURM_PROCID is set but SLURM_NTASKS is not"},
		{"RANK wins over Open MPI", map[string]string{"RANK": "0", "WORLD_SIZE": "1", "OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4"},
			Config{Rank: 0, Size: 1}, ""},
		{"single worker needs no master", map[string]string{"RANK": "0", "WORLD_SIZE": "1"}, Config{Rank: 0, Size: 1}, ""},
		{"not a worker", map[string]string{}, Config{}, "not started as a worker"},
		{"size without rank", map[string]string{"WORLD_SIZE": "2"}, Config{}, "WORLD_SIZE is set but RANK is not"},
		{"rank not a number", map[string]string{"RANK": "one", "WORLD_SIZE": "2"}, Config{}, `RANK="one": not an integer`},
		{"rank out of range", map[string]string{"RANK": "2", "WORLD_SIZE": "2"}, Config{}, "want 0 <= rank < size"},
		{"missing master", map[string]string{"RANK": "1", "WORLD_SIZE": "2"}, Config{}, "needs MASTER_ADDR and MASTER_PORT"},
		{"bad port", map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "99999"}, Config{}, "MASTER_PORT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := configFromEnv(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %+v, %v; want error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	if _, err := configFromEnv(func(string) (string, bool) { return "", false }); !errors.Is(err, ErrNoEnv) {
		t.Errorf("empty environment: %v, want ErrNoEnv", err)
	}
}

// TestEnvironRoundTrip: what a launcher puts in a child's environment is what the child
// reads back.
func TestEnvironRoundTrip(t *testing.T) {
	want := Config{Rank: 3, Size: 4, MasterAddr: "127.0.0.1:29500", Token: NewJobToken()}
	env := map[string]string{}
	for _, kv := range want.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	got, err := configFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil || got != want {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
}

func TestMasterFD(t *testing.T) {
	cases := []struct {
		name  string
		value string // "" leaves the variable unset
		rank  int
		fd    int // 0: none
		err   string
	}{
		{"unset", "", 0, 0, ""},
		{"rank 0", "4", 0, 4, ""},
		{"spaces", " 5 ", 0, 5, ""},
		{"another rank", "4", 1, 0, "only rank 0"},
		{"not a number", "four", 0, 0, "want the number of an inherited descriptor"},
		{"standard stream", "2", 0, 0, "3 or more"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fd, ok, err := masterFD(func(k string) (string, bool) {
				return tc.value, k == EnvMasterFD && tc.value != ""
			}, tc.rank)
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %d, %t, %v; want error with %q", fd, ok, err, tc.err)
				}
			case err != nil || ok != (tc.fd != 0) || fd != tc.fd:
				t.Fatalf("got %d, %t, %v; want %d", fd, ok, err, tc.fd)
			}
		})
	}
}

// TestConfigFromEnvListener: rank 0 takes over the listener named by SSF_MASTER_FD, the
// same socket, and the variable is gone afterwards.
func TestConfigFromEnvListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fd := inheritedFD(t, ln)
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	for k, v := range map[string]string{EnvRank: "0", EnvWorldSize: "2", EnvMasterAddr: host, EnvMasterPort: port,
		EnvMasterFD: strconv.Itoa(fd)} {
		t.Setenv(k, v)
	}
	cfg, err := ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listener == nil {
		t.Fatal("no listener")
	}
	defer cfg.Listener.Close()
	checkAdopted(t, ln, cfg.Listener)
}

// checkAdopted checks that adopted is the socket of ln, taken over from an inherited
// descriptor: SSF_MASTER_FD is gone, and with ln closed a connection to its address is
// accepted through adopted.
func checkAdopted(t *testing.T, ln, adopted net.Listener) {
	t.Helper()
	if v, set := os.LookupEnv(EnvMasterFD); set {
		t.Errorf("%s=%q is still set", EnvMasterFD, v)
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ln.Close() // the connection can only be accepted through the inherited copy
	a, err := adopted.Accept()
	if err != nil {
		t.Fatalf("accept on the inherited listener: %v", err)
	}
	a.Close()
}

// inheritedFD returns a descriptor of ln that no *os.File owns, as a child inherits it;
// whoever adopts it closes it.
func inheritedFD(t *testing.T, ln net.Listener) int {
	t.Helper()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

// TestListenerFromEnv: a launcher takes over the listener named by SSF_MASTER_FD, the
// same socket, and the variable is gone afterwards; without it there is no listener, and
// a value that names no listening socket is refused by name.
func TestListenerFromEnv(t *testing.T) {
	t.Setenv(EnvMasterFD, "")
	if ln, err := ListenerFromEnv(); ln != nil || err != nil {
		t.Fatalf("without %s: %v, %v; want neither a listener nor an error", EnvMasterFD, ln, err)
	}
	for _, bad := range []string{"x", "1"} {
		t.Setenv(EnvMasterFD, bad)
		if _, err := ListenerFromEnv(); err == nil || !strings.Contains(err.Error(), EnvMasterFD) {
			t.Errorf("%s=%s: %v, want an error naming the variable", EnvMasterFD, bad, err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv(EnvMasterFD, strconv.Itoa(inheritedFD(t, ln)))
	inherited, err := ListenerFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer inherited.Close()
	checkAdopted(t, ln, inherited)
}

// TestDialOwnsListener: Dial closes the listener it was given on every path.
func TestDialOwnsListener(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		err  string
	}{
		{"single rank", Config{Rank: 0, Size: 1}, ""},
		{"not rank 0", Config{Rank: 1, Size: 2, MasterAddr: "127.0.0.1:1"}, "only rank 0"},
		{"bad rank", Config{Rank: 3, Size: 2}, "want 0 <= rank < size"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			tc.cfg.Listener = ln
			c, err := Dial(context.Background(), tc.cfg)
			if c != nil {
				c.Close()
			}
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Dial: %v, want error %q", err, tc.err)
			}
			if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
				t.Errorf("the listener is still open: accept returned %v", err)
			}
		})
	}
}
