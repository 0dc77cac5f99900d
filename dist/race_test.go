//go:build race

package dist

// raceEnabled shrinks the largest test buffers: the race detector slows memory-bound
// loops by an order of magnitude.
const raceEnabled = true
