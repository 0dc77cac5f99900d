// Command bench-collectives times allreduce, allgather and alltoallv between separate processes of
// one machine, with the dist package, for run.sh to set against Open MPI (see README.md).
//
// Started alone it launches -np workers of itself (as train --workers does) and relays
// rank 0's results; a worker joins the job with tcp.Dial, which puts ranks of one machine
// on shared memory unless SSF_SHM=off. With -backend mpi (a binary built with -tags mpi,
// started by mpirun) the workers use the MPI backend instead.
//
// Rank 0 prints one line per operation and size:
//
//	result OP BYTES RANKS MS
//
// where MS is the median, over -batches timed batches, of the time per collective.
// Allreduce sums BYTES/4 floats; allgather gathers BYTES in total, BYTES/RANKS from each
// rank; alltoallv sends BYTES from each rank, BYTES/RANKS to each rank (itself included).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/launch"
	"github.com/ssfusion/ssfusion/dist/mpi"
	"github.com/ssfusion/ssfusion/dist/tcp"
)

func main() {
	np := flag.Int("np", 2, "worker processes to launch (ignored in a worker)")
	backend := flag.String("backend", "tcp", "tcp (tcp.Dial: shared memory on one machine unless SSF_SHM=off) or mpi (under mpirun, -tags mpi build)")
	sizes := flag.String("sizes", "1K,4K,16K,64K,256K,1M,4M,16M,100M,256M", "message sizes, comma-separated (K, M suffixes: KiB, MiB)")
	ops := flag.String("ops", "allreduce,allgather,alltoallv", "operations, comma-separated")
	batches := flag.Int("batches", 5, "timed batches per size; the median is reported")
	bind := flag.String("bind-addr", "", "address a worker listens on for its peers (default 127.0.0.1: one machine); its own interface address across machines or namespaces")
	flag.Parse()
	byteSizes, err := parseSizes(*sizes)
	if err != nil {
		fail(err)
	}
	for _, op := range strings.Split(*ops, ",") {
		if !slices.Contains(operations, op) {
			fail(fmt.Errorf("unknown operation %q (%s)", op, strings.Join(operations, ", ")))
		}
	}
	if *batches < 1 {
		fail(errors.New("-batches must be at least 1"))
	}

	var comm dist.Communicator
	switch *backend {
	case "mpi":
		comm, err = mpi.New()
	case "tcp":
		cfg, cerr := tcp.ConfigFromEnv()
		if errors.Is(cerr, tcp.ErrNoEnv) {
			launchWorkers(*np)
			return
		}
		if cerr != nil {
			fail(cerr)
		}
		if *bind != "" {
			cfg.BindAddr = *bind
		}
		comm, err = tcp.Dial(context.Background(), cfg)
	default:
		err = fmt.Errorf("unknown backend %q (tcp, mpi)", *backend)
	}
	if err != nil {
		fail(err)
	}
	defer comm.Close()
	if comm.Rank() == 0 {
		fmt.Printf("transport %v\n", comm)
	}
	for _, op := range strings.Split(*ops, ",") {
		for _, size := range byteSizes {
			ms, err := measure(comm, op, size, *batches)
			if err != nil {
				fail(fmt.Errorf("%s of %d bytes: %w", op, size, err))
			}
			if comm.Rank() == 0 {
				fmt.Printf("result %s %d %d %.6f\n", op, size, comm.Size(), ms)
			}
		}
	}
}

// operations are the collectives -ops can name.
var operations = []string{"allreduce", "allgather", "alltoallv"}

// launchWorkers runs np workers of this program with the same arguments and waits for them.
func launchWorkers(np int) {
	err := launch.Run(context.Background(), launch.Config{Workers: np, Args: os.Args[1:]})
	if err != nil {
		fail(err)
	}
}

// iterations is how many collectives of size bytes a batch runs: the same on every rank,
// since it depends on the size alone, and enough for a batch to last well above the
// clock's resolution.
func iterations(size int) int { return min(2000, max(3, (256<<20)/size)) }

// measure returns the median time per collective, in ms, over batches.
func measure(c dist.Communicator, op string, size, batches int) (float64, error) {
	P := c.Size()
	floats := make([]float32, size/4)
	rank := c.Rank() // not per element: an interface call each made filling 100 MB slow
	for i := range floats {
		floats[i] = float32(rank+i%7) * 0.25
	}
	block := make([]byte, size/P)
	gather := dist.NewGatherer(c) // into a kept buffer, as the callers of MPI_Allgatherv and MPI_Alltoallv supply one
	send := make([][]byte, P)
	for p := range send {
		send[p] = block
	}
	run := func(n int) error {
		for range n {
			var err error
			switch op {
			case "allreduce":
				err = c.AllReduce(floats, dist.Sum)
			case "allgather":
				_, err = gather.AllGatherV(block)
			default:
				_, err = gather.AllToAllV(send)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	n := iterations(size)
	if err := run(max(1, n/10)); err != nil { // page in, fill pools
		return 0, err
	}
	times := make([]float64, batches)
	for b := range times {
		if err := c.Barrier(); err != nil {
			return 0, err
		}
		start := time.Now()
		if err := run(n); err != nil {
			return 0, err
		}
		if err := c.Barrier(); err != nil { // the batch ends when every rank is done
			return 0, err
		}
		times[b] = float64(time.Since(start).Nanoseconds()) / 1e6 / float64(n)
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := 1
		switch {
		case strings.HasSuffix(f, "K"):
			mult, f = 1<<10, strings.TrimSuffix(f, "K")
		case strings.HasSuffix(f, "M"):
			mult, f = 1<<20, strings.TrimSuffix(f, "M")
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("size %q: want a positive number with an optional K or M suffix", f)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench-collectives:", err)
	os.Exit(1)
}
