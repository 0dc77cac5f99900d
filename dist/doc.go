// Package dist owns what processes of a data-parallel job share: the collectives
// (AllReduce, AllGatherV, AllToAllV, SendRecv, Broadcast, Barrier) behind the Communicator interface, their
// backends (TCP, the default, also across machines, with shared memory between the ranks
// of a job on one machine; in-process, for tests), link emulation (bandwidth and latency
// per link) and the detection of failed or silent peers. It imports nothing else from
// this project.
//
// # Semantics
//
// Every rank issues the same collectives in the same order; the n-th collective of one
// rank meets the n-th of every other, and every frame on the wire carries that sequence
// number, so that any number of asynchronous collectives can be in flight at once and
// progress together (a link's frames are sent round-robin across collectives, and
// received frames are sorted by sequence number). AllReduce with Average divides by Size
// after the sum. Results are bit-identical on every rank: the ring algorithm sums each
// chunk once, in a fixed order along the ring, then copies it to everyone; recursive
// doubling (small buffers) has every rank evaluate the same expression tree with the same
// operand order. Neither depends on timing or frame sizes.
//
// # Algorithms
//
// AllReduce uses recursive doubling up to 64 KiB (log2 P rounds) and a pipelined ring
// (reduce-scatter then allgather, 2(P-1)/P of the buffer per link) above. Broadcast uses a
// binomial tree up to 64 KiB and a pipelined chain above. AllGatherV is a ring in which
// every block carries its size, checked against a limit before anything is allocated.
// AllToAllV is the pairwise exchange: P-1 steps, in step i each rank sends its block to
// rank r+i and receives rank r-i's; SendRecv is one such step, with peers the caller names. Barrier is a dissemination barrier. The ring and chain keep one outgoing link per rank
// busy, so on shaped links their time follows the usual cost model (alpha-beta, one NIC
// per node). WithSmallThreshold and WithSegmentSize tune the choices.
//
// # Failures
//
// A collective that cannot complete fails with a *PeerError naming the rank at fault and
// wrapping the cause (ErrConnLost, ErrPeerClosed, ErrTimeout, ErrProtocol, ErrMismatch,
// ErrInvalid), for example
//
//	dist: rank 2: connection closed during allreduce #17 (reported by rank 0)
//
// The first failure breaks the communicator: the rank that detects it sends an abort frame
// naming the culprit to every peer and closes its connections, so every rank fails,
// pending and later collectives alike, instead of waiting. Detection:
//
//   - a connection that breaks or ends without a goodbye: at once;
//   - a malformed, oversized or truncated frame, or one of another collective: at once;
//     lengths are checked before any allocation (a frame carries at most 16 MiB, an
//     AllGatherV block at most WithMaxMessage);
//   - a peer that sends nothing while a collective waits on it: after Timeout (default
//     DefaultTimeout). Links carry heartbeats every Timeout/4 when idle, which also say
//     whom the sender waits on, so that a rank blocked behind another is not blamed: the
//     rank that waits on the real culprit reports it, within Timeout; other ranks wait at
//     most 3*Timeout before they blame their own silent neighbour. A peer whose heartbeats
//     stop is blamed after Timeout, one that does not read our frames likewise;
//   - a peer that closed its communicator, when a collective needs it.
//
// A collective thus waits at most about Timeout (3*Timeout behind a chain of waiting
// ranks) for a peer that stopped taking part. Set Timeout above the longest time one rank
// can lag behind the others (an evaluation that only rank 0 runs, a checkpoint write).
//
// # Starting a TCP job
//
// A launcher (train --workers N) starts N processes with, in each environment:
//
//	RANK=r  WORLD_SIZE=N  LOCAL_RANK=r  MASTER_ADDR=127.0.0.1  MASTER_PORT=p  SSF_JOB_TOKEN=t
//
// where p is the port of a listener the launcher opened on rank 0's machine and t a fresh
// random token (NewJobToken); TCPConfig.Environ builds the list. Rank 0 inherits that
// listener (InheritListener, SSF_MASTER_FD) rather than binding p again, so no other
// process can take the port between its choice and the rendezvous (a program that runs
// rank 0 in-process sets TCPConfig.Listener instead). Each worker calls ConfigFromEnv, sets BindAddr,
// Timeout, Bandwidth and Latency from its flags, and calls DialTCP. Processes started by
// mpirun are recognised by OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE instead (MASTER_*
// and the token are then passed with mpirun -x). ConfigFromEnv returns ErrNoEnv when the
// process is not a worker, which is how a command knows it should launch them. Launch, the
// launcher of this package, gives each worker GOMAXPROCS as its share of the CPUs and, on
// Linux with at least as many CPUs as workers, binds it to a share of its own, as mpirun
// binds ranks to cores (SSF_BIND=none, or GOMAXPROCS set, leaves them unbound).
//
// Rank 0 listens at MASTER_PORT on BindAddr; every other rank listens on an ephemeral port
// of BindAddr, dials MASTER_ADDR, proves it holds the token (HMAC challenge, both ways)
// and reports the address peers should dial. Rank 0 answers with every rank's address,
// and the ranks form a full mesh, each dialling the ranks below it. Connections without
// the token, with another world size or a rank already taken are logged with their remote
// address and closed; the job goes on. Listeners close once the mesh is complete.
//
// Across machines, start one worker per machine (or several) with its own RANK, the same
// WORLD_SIZE, MASTER_ADDR set to rank 0's reachable address, and BindAddr set to an
// interface address or 0.0.0.0 (the default, 127.0.0.1, keeps a job on one machine). A
// rank advertises AdvertiseAddr if set, else its bind address, else (when bound to a
// wildcard) the local address of its connection to rank 0.
//
// # Shared memory between ranks of one machine
//
// On Linux, DialTCP moves a job whose ranks all share a machine onto shared memory once the
// TCP mesh is up. Rank 0 creates a segment in /dev/shm under a random name, mode 0600, and
// offers the name and a random magic over the mesh, whose connections all proved the job
// token; every rank maps the segment, checks that it is this user's private file holding
// the magic, and answers whether it could; rank 0 then removes the name, so that nothing
// can open the segment afterwards. If every rank could, the collectives use the segment;
// otherwise (ranks on several machines, or in containers that do not share /dev/shm) the
// job stays on TCP between all its ranks. WithSharedMemory(false) or SSF_SHM=off keep a
// job on TCP, as do Bandwidth and Latency, which emulate links. SSF_SHM_CHUNK, read by
// rank 0, sets the bytes moved per step (default 1 MiB; the segment holds 2(P+1) of them).
//
// Collectives run in steps. In each, every rank writes its part into a slot of its own,
// announces the step (an atomic counter, which is also a futex word), and waits until all
// ranks have announced it: looking at the peers' counters in short bursts and yielding
// between them both the core (to other processes) and the goroutine's turn (to the
// rank's own computation, which an async collective waits beside), then, after a
// millisecond, sleeping on the futex. Slots alternate between two parities, and a rank
// reads a step's data before it announces the next one, so no other handshake is needed.
// AllReduce up to 64 KiB takes one step in which every rank sums all buffers; above, the
// buffer streams through the slots a chunk per step, each rank summing a P-th of the
// chunk into a shared result area a step later, which everyone copies out. Every element
// is summed in rank order, once or by every rank with the same operands, so results are
// bit-identical. AllGatherV, AllToAllV, SendRecv and Broadcast stream blocks through the
// slots; a Gatherer's AllGatherV copies them into the buffer it keeps, where AllGatherV
// allocates a new one each time. The first step
// of each collective carries a descriptor (kind, op, length, root) that every rank
// checks, so mismatched collectives fail on every rank with ErrMismatch. Collectives run
// one at a time, in issue order; an async collective runs once the previous one ended.
// Stats report as traffic the per-rank volume of each collective's bandwidth-optimal
// algorithm on a network (as the MPI backend does), not the bytes copied, so that a
// step's traffic compares across backends.
//
// Failure detection keeps its guarantees: the TCP mesh stays open beside the segment, so
// a rank whose process dies is reported at once (ErrConnLost) when its sockets close; a
// rank that fails publishes its fault in the segment and sends the abort frame on the
// mesh; a rank that closed is blamed when a step needs it (ErrPeerClosed); and a rank
// that does not announce a step within Timeout is blamed by the others (ErrTimeout).
// Every rank that announced a step is past the previous one, so the rank missing from a
// step is the culprit, not a rank waiting on another.
//
// # The MPI backend
//
// Built with -tags mpi (cgo, pkg-config and Debian's libopenmpi-dev; MPIAvailable says),
// NewMPI joins the job mpirun started (MPI_COMM_WORLD; a process started alone is a job
// of size 1). One goroutine locked to an OS thread makes every MPI call
// (MPI_THREAD_FUNNELED); collectives reach it through a queue in issue order, and it
// polls non-blocking MPI collectives (MPI_Testsome, yielding the CPU between polls), so
// that async collectives progress together. Each collective opens with an MPI_Iallgather
// of every rank's 32-byte descriptor (kind, op, length, root, argument check) on a
// communicator of its own: every rank draws the same verdict from them, so a mismatch or
// an invalid argument fails the collective on every rank, naming the culprit, instead of
// reaching MPI, where it would be undefined. The data phase follows, in issue order, on a
// second communicator: MPI_Iallreduce (MPI_FLOAT, MPI_SUM, then the division of Average)
// into a reused staging buffer copied out at the end, MPI_Ibcast, and MPI_Iallgatherv
// (MPI_BYTE, sizes from the descriptors); Barrier is the descriptor exchange itself.
// Buffers that MPI holds until completion are pinned (runtime.Pinner). MPI does not
// promise bit-identical allreduce results across ranks; Open MPI's non-blocking
// allreduce (coll/libnbc) computes each element on one rank and copies it (a binomial
// reduce and broadcast below 4 ranks or 64 KiB, reduce-scatter then allgather above), and
// the tests compare digests of the results across ranks. Stats bytes are estimates, the
// per-rank volume of each collective's bandwidth-optimal algorithm; frames are not
// counted.
//
// Failures differ from TCP: there are no timeouts. A rank that dies, or any error MPI
// reports, makes mpirun abort the whole job (MPI_ERRORS_ARE_FATAL). A rank that closes its
// communicator sends every peer a goodbye naming its last collective, which fails their
// later collectives with ErrPeerClosed; a rank that merely stops issuing collectives
// leaves the others waiting. Close first lets this rank's issued collectives finish (MPI
// cannot withdraw one that peers may have joined) and returns once every rank has closed
// (MPI_Finalize synchronises the job). MPI is initialised once per process. In containers
// run mpirun --allow-run-as-root, and set OMPI_MCA_btl_vader_single_copy_mechanism=none
// where process_vm_readv is forbidden (Docker).
//
// # Link emulation
//
// Bandwidth (bits per second, see ParseBandwidth) and Latency apply to every link, per
// direction, inside the transport: the sender paces its bytes so that the link behaves
// like a cable of that rate, and the receiver delivers each frame Latency after it
// arrived, so latency is paid once per frame and frames in flight overlap.
//
// # Statistics
//
// Stats counts data bytes sent and received (frame headers included; heartbeats and
// other control frames apart) and, per kind of collective, calls, failures, bytes and the
// summed time from issue to completion; Stats.Sub gives the figures of one step.
package dist
