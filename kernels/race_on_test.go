//go:build race

package kernels

// raceEnabled: the race detector makes sync.Pool drop a random share of what it is given, so
// allocation counts are not those of a normal build.
const raceEnabled = true
