// Package faults arms named fault points from the environment, so that a fault-injection
// campaign can make a real process crash, stop or fail at a chosen place: between a
// file's write and its rename, in the middle of a frame, after a cell of an experiment.
// The code at a fault point calls At with the point's name; in a normal run SSF_FAULT is
// unset, the plan is empty and At returns nil after one check.
//
// SSF_FAULT holds one or more faults separated by semicolons, each a list of key=value
// fields:
//
//	point=write-before-rename file=summary.json hit=1 rank=0 action=crash
//
// point (required) names the fault point; hit (default 1) is which arrival of this
// process at that point, counted from 1, triggers it; rank, if given, arms the fault only
// in the process whose RANK is that number; file, if given, only counts arrivals for a
// file of that base name. action is crash (the process kills itself with SIGKILL, as a
// machine that dies would stop), stop (it stops itself with SIGSTOP, as a process that
// hangs) or error (the operation fails with ErrInjected).
package faults

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Env is the environment variable that holds a process's faults.
const Env = "SSF_FAULT"

// envRank is the variable a launcher gives each worker its rank in.
const envRank = "RANK"

// The fault points of this project. The transports' points (before-send, partial-frame,
// after-send, shm-step) are dist's, reached through its fault hook.
const (
	// WritePartial: half of a file's bytes are in its temporary file.
	WritePartial = "write-partial"
	// WriteBeforeRename: a file's temporary file is complete and synced, not yet renamed
	// over the file.
	WriteBeforeRename = "write-before-rename"
	// CellDone: an experiment's cell has ended and its results are written; the next cell
	// has not started.
	CellDone = "cell-done"
)

// Points are the fault points a fault may name.
var Points = []string{WritePartial, WriteBeforeRename, CellDone, "before-send", "partial-frame", "after-send", "shm-step"}

// Actions are what a fault may do.
var Actions = []string{"crash", "stop", "error"}

// ErrInjected is the error of an operation that a fault with action=error made fail.
var ErrInjected = errors.New("injected fault")

// Fault is one armed fault.
type Fault struct {
	Point  string
	Hit    int    // the arrival that triggers it, from 1
	Rank   int    // -1: any process
	File   string // "": any file
	Action string
}

// Plan is a process's faults, with the arrivals counted so far.
type Plan struct {
	faults []Fault
	hits   []atomic.Int64
}

// Parse reads a plan in SSF_FAULT's syntax.
func Parse(spec string) (*Plan, error) {
	var faults []Fault
	for _, part := range strings.Split(spec, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		f, err := parseFault(part)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", Env, strings.TrimSpace(part), err)
		}
		faults = append(faults, f)
	}
	return &Plan{faults: faults, hits: make([]atomic.Int64, len(faults))}, nil
}

func parseFault(s string) (Fault, error) {
	f := Fault{Hit: 1, Rank: -1, Action: "crash"}
	for _, field := range strings.Fields(s) {
		key, value, ok := strings.Cut(field, "=")
		if !ok {
			return f, fmt.Errorf("%q is not key=value", field)
		}
		var err error
		switch key {
		case "point":
			f.Point = value
		case "hit":
			f.Hit, err = strconv.Atoi(value)
			if err == nil && f.Hit < 1 {
				err = errors.New("below 1")
			}
		case "rank":
			f.Rank, err = strconv.Atoi(value)
			if err == nil && f.Rank < 0 {
				err = errors.New("negative")
			}
		case "file":
			f.File = value
		case "action":
			f.Action = value
		default:
			return f, fmt.Errorf("unknown key %q (want point, hit, rank, file or action)", key)
		}
		if err != nil {
			return f, fmt.Errorf("%s=%s: %v", key, value, err)
		}
	}
	if !slices.Contains(Points, f.Point) {
		return f, fmt.Errorf("point %q: want one of %s", f.Point, strings.Join(Points, ", "))
	}
	if !slices.Contains(Actions, f.Action) {
		return f, fmt.Errorf("action %q: want one of %s", f.Action, strings.Join(Actions, ", "))
	}
	return f, nil
}

// arrive counts an arrival of rank at point for file, and returns the fault it
// triggers, if any.
func (p *Plan) arrive(point, file string, rank int) (Fault, bool) {
	if p == nil {
		return Fault{}, false
	}
	for i, f := range p.faults {
		if f.Point != point || f.Rank >= 0 && f.Rank != rank || f.File != "" && f.File != filepath.Base(file) {
			continue
		}
		if int(p.hits[i].Add(1)) == f.Hit {
			return f, true
		}
	}
	return Fault{}, false
}

// process is this process's plan and rank, read from its environment once.
var process = sync.OnceValues(func() (*Plan, int) {
	plan, err := Parse(os.Getenv(Env))
	if err != nil {
		return nil, -1 // Check reports it; a process that did not check runs without faults
	}
	rank, err := strconv.Atoi(os.Getenv(envRank))
	if err != nil {
		rank = -1
	}
	return plan, rank
})

// Check reports a malformed SSF_FAULT, so that a command can refuse it before it starts.
func Check() error {
	_, err := Parse(os.Getenv(Env))
	return err
}

// Armed reports whether this process has any fault at point.
func Armed(point string) bool {
	plan, _ := process()
	return plan != nil && slices.ContainsFunc(plan.faults, func(f Fault) bool { return f.Point == point })
}

// At is a fault point: it counts this process's arrival at point (for file, if the point
// concerns one) and carries out the fault it triggers. A crash or stop does not return
// until the process is continued; error returns ErrInjected, wrapped with the point.
func At(point, file string) error {
	plan, rank := process()
	f, ok := plan.arrive(point, file, rank)
	if !ok {
		return nil
	}
	fmt.Fprintf(os.Stderr, "fault: %s at %s (hit %d)\n", f.Action, describe(point, file), f.Hit)
	switch f.Action {
	case "crash":
		crash()
	case "stop":
		stop()
		return nil
	}
	return fmt.Errorf("%w at %s", ErrInjected, describe(point, file))
}

func describe(point, file string) string {
	if file == "" {
		return point
	}
	return point + " of " + filepath.Base(file)
}

// crash ends the process at once, as SIGKILL does: no deferred call, no flush.
func crash() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		p.Kill()
	}
	select {} // the signal arrives asynchronously
}
