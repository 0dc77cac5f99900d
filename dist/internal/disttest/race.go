//go:build race

package disttest

// RaceEnabled shrinks the largest test buffers: the race detector slows memory-bound
// loops by an order of magnitude.
const RaceEnabled = true
