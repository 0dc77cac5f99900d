//go:build !race

package disttest

// RaceEnabled is false without the race detector.
const RaceEnabled = false
