package engine

import (
	"errors"
	"fmt"

	"github.com/ssfusion/ssfusion/dist"
)

// fault is the first failure a communicator records; it breaks the communicator.
type Fault struct {
	Rank     int // culprit
	Reporter int // who detected it
	Cause    error
}

// CauseCode carries a cause's kind across the wire in an abort frame.
type CauseCode uint32

const (
	codeOther CauseCode = iota
	codeConnLost
	codePeerClosed
	codeTimeout
	codeProtocol
	codeMismatch
	codeInvalid
)

var codeErrors = [...]error{
	codeOther:      nil,
	codeConnLost:   dist.ErrConnLost,
	codePeerClosed: dist.ErrPeerClosed,
	codeTimeout:    dist.ErrTimeout,
	codeProtocol:   dist.ErrProtocol,
	codeMismatch:   dist.ErrMismatch,
	codeInvalid:    dist.ErrInvalid,
}

func CodeOf(err error) CauseCode {
	for c, e := range codeErrors {
		if e != nil && errors.Is(err, e) {
			return CauseCode(c)
		}
	}
	return codeOther
}

// RemoteCause is a cause received in an abort frame: its text as the reporter wrote it,
// and the sentinel of its kind so that errors.Is works across ranks.
type RemoteCause struct {
	Code CauseCode
	Msg  string
}

func (c *RemoteCause) Error() string { return c.Msg }

func (c *RemoteCause) Unwrap() error {
	if int(c.Code) < len(codeErrors) {
		return codeErrors[c.Code]
	}
	return nil
}

// ErrAborted is what the algorithms return once the communicator has a fault or is
// closing; coll.end turns it into the error the caller sees.
var ErrAborted = errors.New("dist: collective aborted")

func ProtocolErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{dist.ErrProtocol}, args...)...)
}

func MismatchErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{dist.ErrMismatch}, args...)...)
}
