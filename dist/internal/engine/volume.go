package engine

// What backends that move no frames of their own (MPI, shared memory) report as traffic:
// the per-rank volume of each collective's bandwidth-optimal algorithm on a network, so
// that a step's bytes compare across backends.

// AllReduceVolume: reduce-scatter then allgather, 2(P-1)/P of the buffer each way.
func AllReduceVolume(bytes int64, size int) (sent, recv int64) {
	v := 2 * int64(size-1) * bytes / int64(size)
	return v, v
}

// AllGatherVolume: a ring, in which a rank receives every block but its own and sends
// every block but its right neighbour's.
func AllGatherVolume(lengths []int64, rank int) (sent, recv int64) {
	var total int64
	for _, n := range lengths {
		total += n
	}
	size := len(lengths)
	return total - lengths[(rank+1)%size], total - lengths[rank]
}

// BroadcastVolume: a chain from the root, in which every rank but the root receives the
// buffer and every rank but the last forwards it.
func BroadcastVolume(bytes int64, root, rank, size int) (sent, recv int64) {
	if rank != root {
		recv = bytes
	}
	if rank != (root+size-1)%size {
		sent = bytes
	}
	return sent, recv
}
