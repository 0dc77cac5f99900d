//go:build !race

package nets

const raceEnabled = false
