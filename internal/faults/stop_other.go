//go:build !unix

package faults

// stop cannot stop the process where there is no SIGSTOP; it crashes it instead.
func stop() { crash() }
