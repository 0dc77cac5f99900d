//go:build linux

package shm

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"unsafe"

	"github.com/ssfusion/ssfusion/dist/internal/engine"
	"golang.org/x/sys/unix"
)

// shmDir is where segments are created: tmpfs on Linux, and private to the machine (or
// to the container), which is what makes a segment prove that two ranks share a host.
var shmDir = "/dev/shm"

const Supported = true

// Layout of a segment. Every rank owns a control block on cache lines of its own (so that
// one rank's flag does not evict another's) and two data slots; the job shares two
// result areas. Slots and result areas alternate between two parities, by step, so that
// a rank can fill the next step's slot while slower peers still read the last one.
const (
	shmMagicSize = 16   // random bytes rank 0 writes and the others check
	shmHeader    = 128  // the magic, then padding
	shmCtlSize   = 512  // one rank's control block
	shmAlign     = 4096 // data areas start on pages
)

// Offsets inside a control block.
const (
	ctlArrive   = 0   // uint32, futex word: the last step this rank completed its part of
	ctlSleepers = 64  // uint32: peers asleep on this rank's arrive word
	ctlState    = 128 // uint32: shmRunning, shmClosed, shmFailed
	ctlCulprit  = 132 // int32: the fault's culprit, once state is shmFailed
	ctlReporter = 136 // int32
	ctlCode     = 140 // uint32: engine.CauseCode
	ctlMsgLen   = 144 // uint32: bytes of the fault's text
	ctlDesc     = 192 // two shmDesc, by step parity
	ctlMsg      = 256 // the fault's text, up to maxShmFaultText bytes

	maxShmFaultText = shmCtlSize - ctlMsg
)

const (
	shmRunning uint32 = iota
	shmClosed
	shmFailed
)

// shmDesc is what a rank announces at the first step of a collective, so that every rank
// can check that all of them issued the same one.
type shmDesc struct {
	seq  uint64
	kind uint32 // engine.CollKind | dist.Op<<8
	root uint32
	size uint64 // elements of an allreduce, bytes of a broadcast or allgatherv block
}

// segment is one rank's mapping of the job's shared memory.
type segment struct {
	mem   []byte
	size  int // ranks
	chunk int // bytes of one slot
	ctl   int // offset of the control blocks
	slots int // offset of the data slots
	res   int // offset of the result areas
}

// slotHeader is the room before each data slot for the P block sizes an alltoallv
// announces, on cache lines of their own. Outside the slot, they leave all of it to the
// pieces, so that blocks of a P-th of the slot (powers of two, say) pass in one step.
func slotHeader(size int) int { return (8*size + 63) &^ 63 }

func shmLayout(size, chunk int) (total, ctl, slots, res int) {
	ctl = shmHeader
	slots = (ctl + size*shmCtlSize + shmAlign - 1) / shmAlign * shmAlign
	res = slots + 2*size*(slotHeader(size)+chunk)
	total = res + 2*chunk
	return
}

// createSegment makes a fresh segment under a random name, readable and writable by this
// user only. The name and magic are the secret that lets the other ranks in; they learn
// them only over the authenticated TCP mesh.
func createSegment(size, chunk int) (seg *segment, name string, magic []byte, err error) {
	var rnd [16]byte
	rand.Read(rnd[:])
	name = "ssfusion-" + hex.EncodeToString(rnd[:])
	magic = make([]byte, shmMagicSize)
	rand.Read(magic)
	path := filepath.Join(shmDir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, "", nil, fmt.Errorf("dist: create shared memory: %w", err)
	}
	defer f.Close()
	total, _, _, _ := shmLayout(size, chunk)
	// Reserve the pages now: a tmpfs that runs full would otherwise kill a rank with
	// SIGBUS in the middle of a collective instead of failing here.
	if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(total)); err != nil {
		os.Remove(path)
		return nil, "", nil, fmt.Errorf("dist: reserve %d bytes of shared memory in %s: %w", total, shmDir, err)
	}
	seg, err = mapSegment(f, size, chunk)
	if err != nil {
		os.Remove(path)
		return nil, "", nil, err
	}
	copy(seg.mem, magic)
	return seg, name, magic, nil
}

// openSegment maps the segment rank 0 announced. It fails when the name does not exist
// here (another machine or container), is not this user's private file, or does not
// hold the magic.
func openSegment(name string, magic []byte, size, chunk int) (*segment, error) {
	if name == "" || filepath.Base(name) != name || len(magic) != shmMagicSize {
		return nil, errors.New("dist: malformed shared memory offer")
	}
	f, err := os.OpenFile(filepath.Join(shmDir, name), os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("dist: open shared memory: %w", err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("dist: stat shared memory: %w", err)
	}
	total, _, _, _ := shmLayout(size, chunk)
	switch {
	case st.Uid != uint32(os.Getuid()) || st.Mode&0o077 != 0:
		return nil, fmt.Errorf("dist: shared memory %s is not private to this user (mode %o)", name, st.Mode&0o777)
	case st.Size != int64(total):
		return nil, fmt.Errorf("dist: shared memory %s holds %d bytes, want %d", name, st.Size, total)
	}
	seg, err := mapSegment(f, size, chunk)
	if err != nil {
		return nil, err
	}
	if string(seg.mem[:shmMagicSize]) != string(magic) {
		seg.unmap()
		return nil, fmt.Errorf("dist: shared memory %s belongs to another job", name)
	}
	return seg, nil
}

func mapSegment(f *os.File, size, chunk int) (*segment, error) {
	total, ctl, slots, res := shmLayout(size, chunk)
	mem, err := unix.Mmap(int(f.Fd()), 0, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("dist: map shared memory: %w", err)
	}
	return &segment{mem: mem, size: size, chunk: chunk, ctl: ctl, slots: slots, res: res}, nil
}

func removeSegment(name string) { os.Remove(filepath.Join(shmDir, name)) }

func (s *segment) unmap() {
	if s.mem != nil {
		unix.Munmap(s.mem)
		s.mem = nil
	}
}

func (s *segment) u32(rank, off int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&s.mem[s.ctl+rank*shmCtlSize+off]))
}

func (s *segment) arrive(rank int) *atomic.Uint32   { return s.u32(rank, ctlArrive) }
func (s *segment) sleepers(rank int) *atomic.Uint32 { return s.u32(rank, ctlSleepers) }
func (s *segment) state(rank int) *atomic.Uint32    { return s.u32(rank, ctlState) }

// setFault publishes this rank's fault, then its failed state: a peer that sees the
// state also sees the fault.
func (s *segment) setFault(rank int, f engine.Fault) {
	s.u32(rank, ctlCulprit).Store(uint32(f.Rank))
	s.u32(rank, ctlReporter).Store(uint32(f.Reporter))
	s.u32(rank, ctlCode).Store(uint32(engine.CodeOf(f.Cause)))
	msg := f.Cause.Error()
	if len(msg) > maxShmFaultText {
		msg = msg[:maxShmFaultText]
	}
	base := s.ctl + rank*shmCtlSize
	copy(s.mem[base+ctlMsg:], msg)
	s.u32(rank, ctlMsgLen).Store(uint32(len(msg)))
	s.state(rank).Store(shmFailed)
}

// faultOf reads the fault a failed rank published.
func (s *segment) faultOf(rank int) engine.Fault {
	code := engine.CauseCode(s.u32(rank, ctlCode).Load())
	culprit := int(int32(s.u32(rank, ctlCulprit).Load()))
	reporter := int(int32(s.u32(rank, ctlReporter).Load()))
	n := min(int(s.u32(rank, ctlMsgLen).Load()), maxShmFaultText)
	base := s.ctl + rank*shmCtlSize + ctlMsg
	msg := string(s.mem[base : base+n])
	return engine.Fault{Rank: culprit, Reporter: reporter, Cause: &engine.RemoteCause{Code: code, Msg: msg}}
}

// desc is rank's descriptor slot for steps of the given parity. Descriptors are written
// before the step's arrival and read after it, like the data.
func (s *segment) desc(rank int, parity uint32) *shmDesc {
	return (*shmDesc)(unsafe.Pointer(&s.mem[s.ctl+rank*shmCtlSize+ctlDesc+int(parity)*32]))
}

// slot is rank's data slot for steps of the given parity.
func (s *segment) slot(rank int, parity uint32) []byte {
	off := s.slotStart(rank, parity) + slotHeader(s.size)
	return s.mem[off : off+s.chunk : off+s.chunk]
}

// slotSizes is the header before rank's data slot for steps of the given parity: room for
// a size per rank.
func (s *segment) slotSizes(rank int, parity uint32) []byte {
	off := s.slotStart(rank, parity)
	return s.mem[off : off+8*s.size : off+8*s.size]
}

func (s *segment) slotStart(rank int, parity uint32) int {
	return s.slots + (2*rank+int(parity))*(slotHeader(s.size)+s.chunk)
}

// result is the shared result area for the given parity.
func (s *segment) result(parity uint32) []byte {
	off := s.res + int(parity)*s.chunk
	return s.mem[off : off+s.chunk : off+s.chunk]
}

// futexWait sleeps while *w == val, at most timeoutNs. Spurious returns are fine: the
// caller re-checks.
func futexWait(w *atomic.Uint32, val uint32, timeoutNs int64) {
	ts := unix.NsecToTimespec(timeoutNs)
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWaitOp, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWake wakes every process asleep on w.
func futexWake(w *atomic.Uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWakeOp, uintptr(1<<30), 0, 0, 0)
}

// The shared (not process-private) futex operations: the sleepers are other processes.
const (
	futexWaitOp = 0
	futexWakeOp = 1
)

// schedYield gives the core to another runnable process: with more ranks than cores, the
// peer a rank waits on may be waiting for exactly that.
func schedYield() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
