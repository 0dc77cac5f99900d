//go:build unix

package faults

import "syscall"

// stop stops the process with SIGSTOP until something continues it.
func stop() { syscall.Kill(syscall.Getpid(), syscall.SIGSTOP) }
