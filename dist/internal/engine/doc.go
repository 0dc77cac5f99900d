// Package engine is the message engine under the TCP and in-process transports: one rank
// with a link to every peer over any net.Conn, frames that carry a collective's sequence
// number so that any number of collectives progress at once, the collective algorithms
// (recursive doubling and ring allreduce, binomial tree and chain broadcast, ring
// allgather, pairwise all-to-all, dissemination barrier), link emulation, heartbeats, and
// the failure state that turns the first fault into an error naming the rank at fault on
// every rank. The shared memory and MPI transports reuse its failure records, handles and
// counters.
package engine
