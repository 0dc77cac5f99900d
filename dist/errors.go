package dist

import (
	"errors"
	"fmt"
)

// Causes of a failure. A collective's error is a *PeerError that wraps one of them, so
// errors.Is(err, ErrTimeout) and the like work on every rank, also when another rank
// detected the failure and reported it.
var (
	// ErrClosed: this rank's communicator was closed.
	ErrClosed = errors.New("communicator closed")
	// ErrConnLost: a connection broke without the peer saying goodbye (the process
	// died, or the network failed).
	ErrConnLost = errors.New("connection closed")
	// ErrPeerClosed: the peer closed its communicator while a collective needed it.
	ErrPeerClosed = errors.New("closed its communicator")
	// ErrTimeout: the peer sent nothing for longer than the timeout while a collective
	// waited on it, or stopped reading.
	ErrTimeout = errors.New("timed out")
	// ErrProtocol: the peer sent a frame that is malformed, truncated, too large or
	// unexpected.
	ErrProtocol = errors.New("protocol violation")
	// ErrMismatch: the ranks issued different collectives, or the same one with
	// different arguments, under the same sequence number.
	ErrMismatch = errors.New("mismatched collective")
	// ErrInvalid: a rank passed an invalid argument to a collective.
	ErrInvalid = errors.New("invalid argument")
	// ErrRejected: a connection did not present the job's token, or claimed a rank it
	// may not have.
	ErrRejected = errors.New("connection rejected")
)

// PeerError is the error of a collective that could not complete because of a fault on
// rank Rank, which may be this rank (an invalid argument) or another one.
type PeerError struct {
	Rank     int    // the rank at fault
	Op       string // the collective that failed: allreduce, allgatherv, broadcast, barrier
	Seq      uint64 // its issue number, counted from 1 and the same on every rank
	Reporter int    // the rank that detected the fault
	Self     int    // the rank that returned this error
	Err      error  // the cause; wraps one of the Err* variables
}

func (e *PeerError) Error() string {
	s := fmt.Sprintf("dist: rank %d: %v", e.Rank, e.Err)
	if e.Op != "" {
		s += fmt.Sprintf(" during %s #%d", e.Op, e.Seq)
	}
	if e.Reporter != e.Self {
		s += fmt.Sprintf(" (reported by rank %d)", e.Reporter)
	}
	return s
}

func (e *PeerError) Unwrap() error { return e.Err }
