package dist

import "time"

// A CostModel predicts how long one collective takes on a group of size ranks. The
// simulated communicator (NewSim) advances virtual time by it.
type CostModel interface {
	// AllReduce of a buffer of bytes on every rank.
	AllReduce(size, bytes int) time.Duration
	// AllGatherV in which rank r contributes bytes[r]; len(bytes) == size.
	AllGatherV(size int, bytes []int) time.Duration
	// Broadcast of bytes from one rank to the others.
	Broadcast(size, bytes int) time.Duration
	// Barrier of size ranks.
	Barrier(size int) time.Duration
}
