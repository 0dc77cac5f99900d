// Package shm is the transport between the ranks of a job on one machine: collectives
// through a shared memory segment, beside the TCP mesh that keeps detecting failures.
// tcp.Dial calls Upgrade once the mesh is up.
//
// On Linux, Dial moves a job whose ranks all share a machine onto shared memory once the
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
package shm
