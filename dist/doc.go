// Package dist owns the contract between the processes of a data-parallel job: the
// collectives (AllReduce, AllGatherV, AllToAllV, SendRecv, Broadcast, Barrier) behind the
// Communicator interface, what they guarantee, their statistics, the errors that name a
// failed peer, the options of a communicator (timeouts, link emulation) and the fault
// points tests arm. The transports implement it in packages of their own: dist/tcp (the
// default, also across machines), dist/shm (between the ranks of one machine, which TCP
// jobs move to by themselves), dist/inproc (ranks as goroutines, for tests) and dist/mpi
// (Open MPI, build tag mpi); dist/launch starts a job's worker processes. It imports
// nothing else from this project.
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
