// Package mpi is the Open MPI transport: the job that mpirun started, with Open MPI's
// non-blocking collectives behind dist.Communicator. It needs the build tag mpi (cgo and
// Open MPI's headers); without it, New says so and Available is false.
//
// Built with -tags mpi (cgo, pkg-config and Debian's libopenmpi-dev; Available says),
// New joins the job mpirun started (MPI_COMM_WORLD; a process started alone is a job
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
// later collectives with ErrPeerClosed; a rank that closes after such a failure names in
// its goodbye the peer that closed first, so that every rank blames that one whichever
// goodbye reaches it first. A rank that merely stops issuing collectives
// leaves the others waiting. Close first lets this rank's issued collectives finish (MPI
// cannot withdraw one that peers may have joined) and returns once every rank has closed
// (MPI_Finalize synchronises the job). MPI is initialised once per process. In containers
// run mpirun --allow-run-as-root, and set OMPI_MCA_btl_vader_single_copy_mechanism=none
// where process_vm_readv is forbidden (Docker).
package mpi
