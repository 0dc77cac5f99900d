//go:build mpi

package mpi

/*
#cgo pkg-config: ompi-c
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <mpi.h>

// MPI's handles and constants (MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM, MPI_BYTE, ...) are
// macros over library globals that cgo cannot name, so every call that needs one goes
// through a wrapper here. All of them run on the progress thread.

static char ssf_empty; // the address passed for an empty buffer

static void *ssf_buf(void *p) { return p ? p : (void *)&ssf_empty; }

static int ssf_init(int *provided) {
	return MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, provided);
}

static int ssf_funneled(void) { return MPI_THREAD_FUNNELED; }

static int ssf_finalize(void) { return MPI_Finalize(); }

static void ssf_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

static int ssf_world(int *rank, int *size) {
	int rc = MPI_Comm_rank(MPI_COMM_WORLD, rank);
	return rc != MPI_SUCCESS ? rc : MPI_Comm_size(MPI_COMM_WORLD, size);
}

static int ssf_dup_world(MPI_Comm *c) { return MPI_Comm_dup(MPI_COMM_WORLD, c); }

static int ssf_comm_free(MPI_Comm *c) { return MPI_Comm_free(c); }

static int ssf_iallgather_bytes(void *send, int n, void *recv, MPI_Comm c, MPI_Request *r) {
	return MPI_Iallgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, c, r);
}

static int ssf_iallgatherv_bytes(void *send, int n, void *recv, int *counts, int *displs,
		MPI_Comm c, MPI_Request *r) {
	return MPI_Iallgatherv(ssf_buf(send), n, MPI_BYTE, recv, counts, displs, MPI_BYTE, c, r);
}

static int ssf_ialltoallv_bytes(void *send, int *scounts, int *sdispls, void *recv, int *rcounts,
		int *rdispls, MPI_Comm c, MPI_Request *r) {
	return MPI_Ialltoallv(ssf_buf(send), scounts, sdispls, MPI_BYTE, ssf_buf(recv), rcounts, rdispls, MPI_BYTE, c, r);
}

static int ssf_iallreduce_sum_f32(float *send, float *recv, int n, MPI_Comm c, MPI_Request *r) {
	return MPI_Iallreduce(send, recv, n, MPI_FLOAT, MPI_SUM, c, r);
}

static int ssf_ibcast_bytes(void *buf, int n, int root, MPI_Comm c, MPI_Request *r) {
	return MPI_Ibcast(buf, n, MPI_BYTE, root, c, r);
}

static int ssf_isend_i64(int64_t *v, int n, int peer, MPI_Comm c, MPI_Request *r) {
	return MPI_Isend(v, n, MPI_INT64_T, peer, 0, c, r);
}

static int ssf_irecv_i64(int64_t *v, int n, int peer, MPI_Comm c, MPI_Request *r) {
	return MPI_Irecv(v, n, MPI_INT64_T, peer, 0, c, r);
}

// ssf_allreduce_sum_f32 is the blocking MPI_Allreduce on MPI_COMM_WORLD, the yardstick
// of the benchmarks.
static int ssf_allreduce_sum_f32(float *buf, int n) {
	return MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

// ssf_poll drives MPI's progress engine (non-blocking collectives only advance inside MPI
// calls) until a request completes, *wake is set (new work or Close), or rounds tests
// have found nothing. It yields the CPU between tests, so that ranks sharing cores with
// each other or with compute threads do not starve them. Looping here rather than in Go
// saves a cgo call per test.
static int ssf_poll(int n, MPI_Request *reqs, int *idx, int *count, int *wake, int rounds) {
	for (int i = 0; i < rounds; i++) {
		int rc = MPI_Testsome(n, reqs, count, idx, MPI_STATUSES_IGNORE);
		if (rc != MPI_SUCCESS) {
			return rc;
		}
		if (*count > 0 && *count != MPI_UNDEFINED) {
			return MPI_SUCCESS;
		}
		if (__atomic_load_n(wake, __ATOMIC_ACQUIRE)) {
			break;
		}
		sched_yield();
	}
	*count = 0;
	return MPI_SUCCESS;
}

static void ssf_error_string(int code, char *s, int *n) {
	if (MPI_Error_string(code, s, n) != MPI_SUCCESS) {
		*n = 0;
	}
}

static int ssf_max_error_string(void) { return MPI_MAX_ERROR_STRING; }
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/engine"
)

// Available reports whether this binary was built with the MPI backend (build tag mpi).
const Available = true

// MPI may be initialised once per process, and never again after MPI_Finalize.
var mpiProcess struct {
	sync.Mutex
	state int // mpiNever, mpiOpen, mpiFinalized
}

const (
	mpiNever = iota
	mpiOpen
	mpiFinalized
)

// pollRounds bounds one ssf_poll call, so that the progress thread looks at its queue
// now and then even if nobody sets the wake flag.
const pollRounds = 1000

// New initialises MPI and returns this process's rank of the job that mpirun started
// (MPI_COMM_WORLD). A process started without mpirun is a job of size 1. MPI can be
// initialised once per process: New fails while the communicator it returned is open,
// and after its Close has finalised MPI.
//
// See the package documentation for how the MPI backend runs the collectives and how it
// differs from the TCP backend on failures.
func New() (dist.Communicator, error) {
	mpiProcess.Lock()
	defer mpiProcess.Unlock()
	switch mpiProcess.state {
	case mpiOpen:
		return nil, errors.New("dist: New: MPI is already initialised by an open communicator of this process; MPI allows one per process")
	case mpiFinalized:
		return nil, errors.New("dist: New: MPI was finalised by Close and cannot be initialised again in this process")
	}
	m := &mpiComm{
		kick: make(chan struct{}, 1),
		done: make(chan struct{}),
		wake: new(int32),
	}
	ready := make(chan error)
	go m.progress(ready)
	if err := <-ready; err != nil {
		mpiProcess.state = mpiFinalized
		return nil, err
	}
	mpiProcess.state = mpiOpen
	return m, nil
}

// mpiComm is the dist.Communicator of the MPI backend.
//
// One goroutine, locked to its OS thread, makes every MPI call (MPI_THREAD_FUNNELED):
// the progress thread. Callers hand it their collectives through a queue, in issue order,
// and wait on a handle. Each collective has two phases, each a non-blocking MPI
// collective that the thread polls to completion together with every other one in
// flight:
//
//  1. the descriptor exchange, an MPI_Iallgather of every rank's mpiDesc on the
//     communicator ctl, posted as soon as the thread takes the collective from the queue;
//  2. the data phase (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgatherv) on the communicator
//     data, started once the descriptors agree, in issue order.
//
// MPI matches the collectives of a communicator by the order in which each rank starts
// them. Descriptors are posted in issue order on ctl, and data phases are started in
// issue order on data, so both orders are the same on every rank even though phase 2 of
// one collective may start after phase 1 of later ones. A third communicator, bye,
// carries the point-to-point goodbyes of Close.
type mpiComm struct {
	rank, size int

	mu      sync.Mutex
	seq     uint64   // last issued collective
	queue   []*mpiOp // issued, not yet taken by the progress thread
	closing bool
	flt     *engine.Fault // the fault of the earliest failed collective; set by the progress thread

	kick     chan struct{} // wakes the progress thread when it sleeps, idle
	wake     *int32        // set to stop the progress thread's poll loop early; read by C
	done     chan struct{} // closed once the progress thread has finalised MPI
	closeErr error

	stats   engine.Counters
	staging stagingPool

	// Owned by the progress thread.
	ctl, data, bye C.MPI_Comm
	reqs           []C.MPI_Request // in flight, in the layout MPI_Testsome wants
	owners         []mpiReq        // owners[i] is what reqs[i] belongs to
	idx            []C.int
	pending        []*mpiOp // descriptors posted, data phase not started, in issue order
	running        int      // data phases in flight
	posted         uint64   // the last collective whose descriptor was posted
	failFrom       uint64   // collectives from this one on fail; 0: none
	byeIn, byeOut  []int64  // goodbyes, byeWords each: the last collective each peer posted and whom it blames, and ours
	byePin         runtime.Pinner
	byeSends       int // goodbyes sent, not yet complete
	byeRecvs       int // peers whose goodbye has not arrived
}

// mpiOp is one collective, from issue to completion.
type mpiOp struct {
	kind  engine.CollKind
	op    dist.Op
	seq   uint64
	start time.Time
	desc  []int64 // this rank's descriptor, then every rank's (descWidth each)

	f32    []float32 // allreduce: the caller's buffer, MPI's send buffer
	stage  []float32 // allreduce: MPI's receive buffer, copied to f32 at the end
	buf    []byte    // broadcast: the buffer; allgatherv, alltoallv: what this rank sends
	blocks [][]byte  // alltoallv: the caller's blocks, packed into buf once the phase starts
	root   int
	counts []C.int      // allgatherv: the counts, then the displacements; alltoallv: send's, then receive's
	out    [][]byte     // allgatherv, alltoallv: the result
	fn     func() error // not a collective: run on the progress thread (benchmarks)
	h      *engine.Handle

	// Set by the progress thread.
	pin        runtime.Pinner // every Go buffer MPI holds for this op
	inMPI      bool           // a request of this op is in flight: keep pin
	descDone   bool
	finished   bool
	sent, recv int64 // the traffic estimate counted in dist.Stats on success
}

type reqKind uint8

const (
	reqDesc reqKind = iota + 1
	reqData
	reqByeSend
	reqByeRecv
)

type mpiReq struct {
	what reqKind
	op   *mpiOp
	peer int
}

func (m *mpiComm) Rank() int { return m.rank }
func (m *mpiComm) Size() int { return m.size }

func (m *mpiComm) String() string {
	return fmt.Sprintf("dist.Communicator(MPI rank %d of %d)", m.rank, m.size)
}

// AllReduce implements dist.Communicator.
func (m *mpiComm) AllReduce(buf []float32, op dist.Op) error { return m.AllReduceAsync(buf, op).Wait() }

// AllReduceAsync implements dist.Communicator.
func (m *mpiComm) AllReduceAsync(buf []float32, op dist.Op) dist.Handle {
	o := &mpiOp{kind: engine.CollAllReduce, op: op, f32: buf}
	d := o.describe(newDesc(engine.CollAllReduce, op, len(buf), 0, m.size), m.size)
	if d.invalid == 0 && m.size > 1 && len(buf) > 0 {
		// Taken here, in the caller's goroutine, so that the progress thread never
		// waits for a large allocation.
		o.stage = m.staging.get(len(buf))
	}
	return m.issue(o)
}

// AllGatherV implements dist.Communicator.
func (m *mpiComm) AllGatherV(send []byte) ([][]byte, error) { return m.AllGatherVAsync(send).Wait() }

// AllGatherVAsync implements dist.Communicator.
func (m *mpiComm) AllGatherVAsync(send []byte) dist.GatherHandle {
	o := &mpiOp{kind: engine.CollAllGatherV, buf: send}
	o.describe(newDesc(engine.CollAllGatherV, 0, len(send), 0, m.size), m.size)
	return engine.GatherHandle{Handle: m.issue(o)}
}

// AllToAllV implements dist.Communicator.
func (m *mpiComm) AllToAllV(send [][]byte) ([][]byte, error) { return m.AllToAllVAsync(send).Wait() }

// AllToAllVAsync implements dist.Communicator. Every rank's descriptor carries the sizes of its
// blocks, so after the descriptor exchange each rank knows what it receives from whom.
func (m *mpiComm) AllToAllVAsync(send [][]byte) dist.GatherHandle {
	o := &mpiOp{kind: engine.CollAllToAllV, blocks: send}
	var total int
	for _, b := range send {
		total += len(b)
	}
	o.describe(newDesc(engine.CollAllToAllV, 0, total, 0, m.size), m.size)
	if len(send) != m.size {
		o.desc[3] = int64(invalidBlocks)
		o.desc[2] = int64(len(send)) // the root word: what invalidText reports
	} else {
		for q, b := range send {
			o.desc[descWords+q] = int64(len(b))
		}
	}
	return engine.GatherHandle{Handle: m.issue(o)}
}

// SendRecv implements dist.Communicator. The descriptor carries to as its root and from in its
// first extra word, so that every rank checks that the peers pair up.
func (m *mpiComm) SendRecv(send []byte, to, from int) ([]byte, error) {
	o := &mpiOp{kind: engine.CollSendRecv, buf: send}
	o.describe(newDesc(engine.CollSendRecv, 0, len(send), to, m.size), m.size)
	o.desc[descWords] = int64(from)
	if engine.SendRecvArgs(send, to, from, m.rank, m.size, maxCount) != "" {
		o.desc[3] = int64(invalidPeers)
		o.desc[1] = int64(from) // for the message: from in the length word
	}
	out, err := engine.GatherHandle{Handle: m.issue(o)}.Wait()
	if err != nil {
		return nil, err
	}
	return out[from], nil
}

// Broadcast implements dist.Communicator.
func (m *mpiComm) Broadcast(buf []byte, root int) error { return m.BroadcastAsync(buf, root).Wait() }

// BroadcastAsync implements dist.Communicator.
func (m *mpiComm) BroadcastAsync(buf []byte, root int) dist.Handle {
	o := &mpiOp{kind: engine.CollBroadcast, buf: buf, root: root}
	o.describe(newDesc(engine.CollBroadcast, 0, len(buf), root, m.size), m.size)
	return m.issue(o)
}

// Barrier implements dist.Communicator.
func (m *mpiComm) Barrier() error {
	o := &mpiOp{kind: engine.CollBarrier}
	o.describe(newDesc(engine.CollBarrier, 0, 0, 0, m.size), m.size)
	return m.issue(o).Wait()
}

// dist.Stats implements dist.Communicator. Bytes are estimates (MPI does not report its traffic):
// per collective, the volume the bandwidth-optimal algorithm moves through this rank (see
// engine.AllReduceVolume, engine.AllGatherVolume, engine.BroadcastVolume), counted when it succeeds. The
// descriptor exchanges and goodbyes count as control bytes. Frames are not counted.
func (m *mpiComm) Stats() dist.Stats { return m.stats.Snapshot() }

// Close implements dist.Communicator. Under MPI a collective cannot be withdrawn once other
// ranks may have joined it, so Close first lets this rank's issued collectives finish
// (they fail with dist.ErrPeerClosed if a peer closes without issuing them). It then sends
// every peer a goodbye naming the last collective it issued, which fails the peers'
// later collectives with dist.ErrPeerClosed instead of leaving them waiting, waits for every
// peer's goodbye, and finalises MPI. MPI_Finalize synchronises the whole job anyway, so
// Close returns once every rank has closed.
func (m *mpiComm) Close() error {
	m.mu.Lock()
	again := m.closing
	m.closing = true
	m.mu.Unlock()
	m.wakeUp()
	<-m.done
	if again {
		return nil
	}
	return m.closeErr
}

// describe sets o's descriptor (the first descWidth of room for every rank's).
func (o *mpiOp) describe(d mpiDesc, size int) mpiDesc {
	o.desc = make([]int64, descWidth(size)*(size+1))
	d.put(o.desc)
	return d
}

// issue hands o to the progress thread. The sequence number is taken and the queue
// appended under one lock, which is what keeps the issue order.
func (m *mpiComm) issue(o *mpiOp) *engine.Handle {
	o.h = engine.NewHandle()
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		m.release(o)
		o.h.Finish(nil, fmt.Errorf("dist: %v: %w", o.kind, dist.ErrClosed))
		return o.h
	}
	m.seq++
	o.seq, o.start = m.seq, time.Now()
	m.stats.Ops[o.kind].Calls.Add(1)
	m.stats.Busy.Start(o.start)
	if f := m.flt; f != nil {
		m.mu.Unlock()
		m.complete(o, m.peerError(f, o))
		return o.h
	}
	m.queue = append(m.queue, o)
	m.mu.Unlock()
	m.wakeUp()
	return o.h
}

// onThread runs fn on the progress thread, in issue order with the collectives, and
// returns its error.
func (m *mpiComm) onThread(fn func() error) error {
	o := &mpiOp{fn: fn, h: engine.NewHandle()}
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		return fmt.Errorf("dist: %w", dist.ErrClosed)
	}
	m.queue = append(m.queue, o)
	m.mu.Unlock()
	m.wakeUp()
	return o.h.Wait()
}

// blockingAllReduce sums buf over the ranks, in place, with MPI_Allreduce on
// MPI_COMM_WORLD: Open MPI's own blocking allreduce, the yardstick of the benchmarks.
// Every rank must call it at the same point of its sequence of calls.
func (m *mpiComm) blockingAllReduce(buf []float32) error {
	if len(buf) > maxCount {
		return fmt.Errorf("dist: MPI_Allreduce of %d floats exceeds the MPI count limit", len(buf))
	}
	return m.onThread(func() error {
		if len(buf) == 0 {
			return nil
		}
		// A blocking call: MPI does not keep the pointer, so it needs no pinning.
		return mpiError("MPI_Allreduce", C.ssf_allreduce_sum_f32((*C.float)(unsafe.Pointer(&buf[0])), C.int(len(buf))))
	})
}

func (m *mpiComm) wakeUp() {
	atomic.StoreInt32(m.wake, 1)
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func (m *mpiComm) peerError(f *engine.Fault, o *mpiOp) error {
	return &dist.PeerError{Rank: f.Rank, Op: o.kind.String(), Seq: o.seq, Reporter: f.Reporter, Self: m.rank, Err: f.Cause}
}

// faultError is the error of o once the communicator has failed.
func (m *mpiComm) faultError(o *mpiOp) error {
	m.mu.Lock()
	f := m.flt
	m.mu.Unlock()
	return m.peerError(f, o)
}

// release returns what o borrowed from the communicator.
func (m *mpiComm) release(o *mpiOp) {
	if o.stage != nil {
		m.staging.put(o.stage)
		o.stage = nil
	}
}

// complete counts o and finishes its handle; any goroutine may call it once MPI no
// longer uses o's buffers.
func (m *mpiComm) complete(o *mpiOp, err error) {
	m.release(o)
	c := &m.stats.Ops[o.kind]
	out := o.out
	if err != nil {
		c.Failed.Add(1)
		out = nil
	} else {
		c.Sent.Add(o.sent)
		c.Recv.Add(o.recv)
		m.stats.Sent.Add(o.sent)
		m.stats.Recv.Add(o.recv)
	}
	now := time.Now()
	c.Nanos.Add(int64(now.Sub(o.start)))
	m.stats.Busy.End(now)
	o.h.Finish(out, err)
}

// The rest runs on the progress thread.

// progress is the progress thread: it initialises MPI, serves the queue until Close, and
// finalises MPI.
func (m *mpiComm) progress(ready chan<- error) {
	// Never unlocked: with MPI_THREAD_FUNNELED every MPI call must come from the thread
	// that initialised MPI, and the thread ends with this goroutine.
	runtime.LockOSThread()
	if err := m.init(); err != nil {
		close(m.done)
		ready <- err
		return
	}
	ready <- nil
	for {
		atomic.StoreInt32(m.wake, 0)
		m.mu.Lock()
		q, closing := m.queue, m.closing
		m.queue = nil
		m.mu.Unlock()
		for _, o := range q {
			if o.fn != nil {
				o.h.Finish(nil, o.fn())
				continue
			}
			m.post(o)
		}
		m.advance()
		if len(m.pending) == 0 && m.running == 0 {
			if closing {
				break
			}
			<-m.kick // idle: sleep until a collective is issued or Close is called
			continue
		}
		m.poll(pollRounds)
	}
	m.shutdown()
}

func (m *mpiComm) init() error {
	var provided C.int
	if rc := C.ssf_init(&provided); rc != 0 {
		return mpiError("MPI_Init_thread", rc)
	}
	if provided < C.ssf_funneled() {
		C.ssf_finalize()
		return fmt.Errorf("dist: MPI_Init_thread provides thread level %d, below MPI_THREAD_FUNNELED", int(provided))
	}
	var rank, size C.int
	m.check(C.ssf_world(&rank, &size), "MPI_Comm_rank")
	m.rank, m.size = int(rank), int(size)
	// Through a local variable: cgo checks the whole object behind a pointer argument
	// that is not literally &struct.field, and m holds Go pointers.
	dup := func() C.MPI_Comm {
		var c C.MPI_Comm
		m.check(C.ssf_dup_world(&c), "MPI_Comm_dup")
		return c
	}
	m.ctl, m.data, m.bye = dup(), dup(), dup()
	// Every peer's goodbye is awaited from the start, so that it is seen whenever this
	// rank polls.
	m.byeIn, m.byeOut = make([]int64, byeWords*m.size), make([]int64, byeWords)
	m.byePin.Pin(&m.byeIn[0])
	m.byePin.Pin(&m.byeOut[0])
	for p := range m.size {
		if p == m.rank {
			continue
		}
		var req C.MPI_Request
		m.check(C.ssf_irecv_i64((*C.int64_t)(unsafe.Pointer(&m.byeIn[byeWords*p])), byeWords, C.int(p), m.bye, &req), "MPI_Irecv")
		m.track(req, mpiReq{what: reqByeRecv, peer: p})
		m.byeRecvs++
	}
	return nil
}

// post starts o's descriptor exchange.
func (m *mpiComm) post(o *mpiOp) {
	if m.failFrom != 0 && o.seq >= m.failFrom {
		m.finish(o, m.faultError(o)) // the communicator failed after o was issued
		return
	}
	o.pin.Pin(&o.desc[0])
	var req C.MPI_Request
	w := descWidth(m.size)
	m.check(C.ssf_iallgather_bytes(unsafe.Pointer(&o.desc[0]), C.int(8*w), unsafe.Pointer(&o.desc[w]), m.ctl, &req),
		"MPI_Iallgather")
	o.inMPI = true
	m.track(req, mpiReq{what: reqDesc, op: o})
	m.pending = append(m.pending, o)
	m.posted = o.seq
}

// advance starts, in issue order, the data phase of every collective whose descriptors
// have arrived, up to the first that is still waiting for them.
func (m *mpiComm) advance() {
	for len(m.pending) > 0 {
		o := m.pending[0]
		if !o.finished && !o.descDone {
			return
		}
		m.pending[0] = nil
		m.pending = m.pending[1:]
		if o.finished {
			continue
		}
		w := descWidth(m.size)
		descs := make([]mpiDesc, m.size)
		for r := range descs {
			descs[r] = descAt(o.desc[w:], r, w)
		}
		if f := agree(m.rank, descs); f != nil {
			m.fail(*f, o.seq)
			m.finish(o, m.faultError(o))
			continue
		}
		m.start(o, descs)
	}
}

// start starts o's data phase, or finishes o if it needs none. Whether it does depends
// on the descriptors alone, so that every rank decides alike.
func (m *mpiComm) start(o *mpiOp, descs []mpiDesc) {
	P := m.size
	var req C.MPI_Request
	switch o.kind {
	case engine.CollBarrier:
		// The descriptor exchange was the barrier: an allgather cannot complete on any
		// rank before every rank has contributed.
		m.finish(o, nil)
		return

	case engine.CollAllReduce:
		n := len(o.f32)
		if P == 1 || n == 0 {
			m.finish(o, nil)
			return
		}
		o.sent, o.recv = engine.AllReduceVolume(int64(n)*4, P)
		o.pin.Pin(&o.f32[0])
		o.pin.Pin(&o.stage[0])
		// Not MPI_IN_PLACE: libnbc then copies the buffer into a scratch buffer it
		// allocates per call, which is slower than our reused staging buffer.
		m.check(C.ssf_iallreduce_sum_f32((*C.float)(unsafe.Pointer(&o.f32[0])), (*C.float)(unsafe.Pointer(&o.stage[0])),
			C.int(n), m.data, &req), "MPI_Iallreduce")

	case engine.CollBroadcast:
		n := len(o.buf)
		if P == 1 || n == 0 {
			m.finish(o, nil)
			return
		}
		o.sent, o.recv = engine.BroadcastVolume(int64(n), o.root, m.rank, P)
		o.pin.Pin(&o.buf[0])
		m.check(C.ssf_ibcast_bytes(unsafe.Pointer(&o.buf[0]), C.int(n), C.int(o.root), m.data, &req), "MPI_Ibcast")

	case engine.CollAllGatherV:
		lengths := make([]int64, P)
		var total int64
		for r, d := range descs {
			lengths[r] = d.length
			total += d.length
		}
		// One allocation for every rank's bytes; each part is capped so that appending
		// to it cannot spill into the next.
		all := make([]byte, total)
		o.out = make([][]byte, P)
		o.counts = make([]C.int, 2*P)
		var off int64
		for r, n := range lengths {
			o.out[r] = all[off : off+n : off+n]
			o.counts[r], o.counts[P+r] = C.int(n), C.int(off)
			off += n
		}
		if P == 1 {
			copy(o.out[0], o.buf)
		}
		if P == 1 || total == 0 {
			m.finish(o, nil)
			return
		}
		o.sent, o.recv = engine.AllGatherVolume(lengths, m.rank)
		var send unsafe.Pointer
		if len(o.buf) > 0 {
			send = unsafe.Pointer(&o.buf[0])
			o.pin.Pin(send)
		}
		o.pin.Pin(&all[0])
		o.pin.Pin(&o.counts[0])
		m.check(C.ssf_iallgatherv_bytes(send, C.int(len(o.buf)), unsafe.Pointer(&all[0]), &o.counts[0], &o.counts[P],
			m.data, &req), "MPI_Iallgatherv")

	case engine.CollAllToAllV:
		w := descWidth(P)
		if !m.startAllToAllV(o, func(from, to int) int64 { return o.desc[w+from*w+descWords+to] }, &req) {
			return
		}

	case engine.CollSendRecv:
		// Under MPI a sendrecv is an alltoallv in which every rank has one block.
		w := descWidth(P)
		for q, d := range descs {
			to := int(d.root)
			if from := int(o.desc[w+to*w+descWords]); from != q {
				m.fail(engine.Fault{Rank: q, Reporter: m.rank, Cause: engine.MismatchErr("sendrecv to rank %d, which receives from rank %d", to, from)}, o.seq)
				m.finish(o, m.faultError(o))
				return
			}
		}
		o.blocks = make([][]byte, P)
		o.blocks[descs[m.rank].root] = o.buf
		size := func(from, to int) int64 {
			if int64(to) == descs[from].root {
				return descs[from].length
			}
			return 0
		}
		if !m.startAllToAllV(o, size, &req) {
			return
		}
	}
	o.inMPI = true
	m.running++
	m.track(req, mpiReq{what: reqData, op: o})
}

// startAllToAllV starts o's MPI_Ialltoallv, or finishes o when nothing moves or the
// sizes overflow MPI's counts; it reports whether a request is in flight. The sizes come
// from the descriptors, which every rank holds alike, so every rank decides alike.
func (m *mpiComm) startAllToAllV(o *mpiOp, size func(from, to int) int64, req *C.MPI_Request) bool {
	P, r := m.size, m.rank
	var moved int64 // by every rank, so that every rank decides alike whether to call MPI
	for q := range P {
		var in int64
		for p := range P {
			if p != q {
				moved += size(p, q)
			}
			if in += size(p, q); in > maxCount {
				f := engine.Fault{Rank: p, Reporter: r, Cause: fmt.Errorf(
					"%w: alltoallv: rank %d's %d bytes bring rank %d's receipt over the MPI count limit of %d", dist.ErrInvalid, p, size(p, q), q, maxCount)}
				m.fail(f, o.seq)
				m.finish(o, m.faultError(o))
				return false
			}
		}
	}
	// The caller's blocks are packed into one send buffer (MPI wants one, with
	// displacements), and the result is one allocation cut into capped blocks. Each rank
	// also sends itself one byte more than its block: Open MPI's nonblocking alltoallv
	// returns at once on a rank whose counts are all zero, without taking its turn among
	// the communicator's collectives, and the next one then never matches.
	o.counts = make([]C.int, 4*P)
	pad := func(q int) int64 {
		if q == r {
			return 1
		}
		return 0
	}
	var sendTotal, recvTotal int64
	for q, b := range o.blocks {
		n := int64(len(b)) + pad(q)
		o.counts[q], o.counts[P+q] = C.int(n), C.int(sendTotal)
		sendTotal += n
	}
	o.buf = make([]byte, 0, sendTotal)
	for q, b := range o.blocks {
		o.buf = append(o.buf, b...)
		if q == r {
			o.buf = append(o.buf, 0)
		}
	}
	o.out = make([][]byte, P)
	lengths := make([]int64, P)
	for p := range P {
		lengths[p] = size(p, r)
		o.counts[2*P+p], o.counts[3*P+p] = C.int(lengths[p]+pad(p)), C.int(recvTotal)
		recvTotal += lengths[p] + pad(p)
	}
	all := make([]byte, recvTotal)
	for p, off := 0, int64(0); p < P; p++ {
		o.out[p] = all[off : off+lengths[p] : off+lengths[p]]
		off += lengths[p] + pad(p)
	}
	if P == 1 || moved == 0 {
		copy(o.out[r], o.blocks[r])
		m.finish(o, nil)
		return false
	}
	o.sent, o.recv = sendTotal-int64(len(o.blocks[r]))-1, recvTotal-lengths[r]-1
	send, recv := unsafe.Pointer(&o.buf[0]), unsafe.Pointer(&all[0])
	o.pin.Pin(send)
	o.pin.Pin(recv)
	o.pin.Pin(&o.counts[0])
	m.check(C.ssf_ialltoallv_bytes(send, &o.counts[0], &o.counts[P], recv, &o.counts[2*P], &o.counts[3*P], m.data, req),
		"MPI_Ialltoallv")
	return true
}

// finish ends o on the progress thread. An allreduce still has to copy its result from
// the staging buffer (and divide it for dist.Average); a goroutine does that, not to hold up
// the other collectives.
func (m *mpiComm) finish(o *mpiOp, err error) {
	if o.finished {
		return
	}
	o.finished = true
	if !o.inMPI {
		o.pin.Unpin()
	}
	if err == nil && o.kind == engine.CollAllReduce && o.stage != nil {
		go func() {
			if o.op == dist.Average {
				divideInto(o.f32, o.stage, float32(m.size))
			} else {
				copy(o.f32, o.stage)
			}
			m.complete(o, nil)
		}()
		return
	}
	m.complete(o, err)
}

// divideInto sets dst[i] = src[i] / d: the division of dist.Average, fused with the copy out
// of the staging buffer.
func divideInto(dst, src []float32, d float32) {
	src = src[:len(dst)]
	for i, x := range src {
		dst[i] = x / d
	}
}

// fail records a fault that fails every collective from seq from on; earlier
// collectives, matched on every rank, run to completion.
func (m *mpiComm) fail(f engine.Fault, from uint64) {
	if m.failFrom == 0 || from < m.failFrom {
		// The fault that strikes first in issue order is the one to report, whichever
		// was learnt first: a peer's goodbye may arrive before the descriptors of an
		// earlier collective that fails for another reason on every rank.
		m.failFrom = from
		m.mu.Lock()
		m.flt = &f
		m.mu.Unlock()
	}
	for _, o := range m.pending {
		if o.seq >= m.failFrom {
			// Its descriptor exchange may stay in flight (other ranks may never post
			// theirs); MPI keeps the descriptor buffer pinned until then.
			m.finish(o, m.faultError(o))
		}
	}
}

func (m *mpiComm) track(req C.MPI_Request, q mpiReq) {
	m.reqs = append(m.reqs, req)
	m.owners = append(m.owners, q)
}

// poll tests the requests in flight for at most rounds rounds and handles those that
// completed. It reports whether any did.
func (m *mpiComm) poll(rounds int) bool {
	n := len(m.reqs)
	if n == 0 {
		return false
	}
	if len(m.idx) < n {
		m.idx = make([]C.int, n)
	}
	var count C.int
	// wake is its own allocation, free of Go pointers, and read by C only during the
	// call: it needs no pinning.
	m.check(C.ssf_poll(C.int(n), &m.reqs[0], &m.idx[0], &count, (*C.int)(unsafe.Pointer(m.wake)), C.int(rounds)),
		"MPI_Testsome")
	if count <= 0 {
		return false
	}
	for _, i := range m.idx[:count] {
		m.completed(m.owners[i])
		m.owners[i].what = 0
	}
	j := 0
	for i, q := range m.owners {
		if q.what != 0 {
			m.reqs[j], m.owners[j] = m.reqs[i], q
			j++
		}
	}
	clear(m.owners[j:])
	m.reqs, m.owners = m.reqs[:j], m.owners[:j]
	return true
}

// byeWords is a goodbye's length: the last collective the closing rank posted, and one more
// than the rank it blames for closing (0 when none): a rank that fails because a peer
// closed, then closes, passes that peer on.
const byeWords = 2

func (m *mpiComm) completed(q mpiReq) {
	switch q.what {
	case reqDesc:
		o := q.op
		o.inMPI = false
		m.stats.CtlSent.Add(int64(8 * descWidth(m.size) * (m.size - 1)))
		m.stats.CtlRecv.Add(int64(8 * descWidth(m.size) * (m.size - 1)))
		if o.finished {
			o.pin.Unpin() // a fault failed it while MPI still held its descriptors
			return
		}
		o.descDone = true
	case reqData:
		q.op.inMPI = false
		m.running--
		m.finish(q.op, nil)
	case reqByeSend:
		m.byeSends--
	case reqByeRecv:
		m.byeRecvs--
		m.stats.CtlRecv.Add(8 * byeWords)
		// The peer posted nothing after its last collective: ours after that one can
		// never complete. A peer that closed because another had closed names that one,
		// so that every rank blames the rank that closed first, whichever goodbye
		// arrives first.
		posted, blamed := m.byeIn[byeWords*q.peer], int(m.byeIn[byeWords*q.peer+1])-1
		f := engine.Fault{Rank: q.peer, Reporter: m.rank, Cause: dist.ErrPeerClosed}
		if blamed >= 0 && blamed != m.rank {
			f.Rank, f.Reporter = blamed, q.peer
		}
		m.fail(f, uint64(posted)+1)
	}
}

// shutdown runs once every collective of this rank has finished: goodbyes, then
// MPI_Finalize.
func (m *mpiComm) shutdown() {
	m.byeOut[0] = int64(m.posted)
	m.mu.Lock()
	if f := m.flt; f != nil && errors.Is(f.Cause, dist.ErrPeerClosed) {
		m.byeOut[1] = int64(f.Rank) + 1
	}
	m.mu.Unlock()
	for p := range m.size {
		if p == m.rank {
			continue
		}
		var req C.MPI_Request
		m.check(C.ssf_isend_i64((*C.int64_t)(unsafe.Pointer(&m.byeOut[0])), byeWords, C.int(p), m.bye, &req), "MPI_Isend")
		m.track(req, mpiReq{what: reqByeSend, peer: p})
		m.byeSends++
		m.stats.CtlSent.Add(8 * byeWords)
	}
	// The peers may close much later; nothing here is worth a busy wait.
	for m.byeSends > 0 || m.byeRecvs > 0 {
		if !m.poll(1) {
			time.Sleep(time.Millisecond)
		}
	}
	// Descriptor exchanges that other ranks never joined may still be in flight; MPI
	// frees their communicator once they are, or at MPI_Finalize, which tolerates them.
	for _, c := range []C.MPI_Comm{m.ctl, m.data, m.bye} {
		m.check(C.ssf_comm_free(&c), "MPI_Comm_free")
	}
	if rc := C.ssf_finalize(); rc != 0 {
		m.closeErr = mpiError("MPI_Finalize", rc)
	}
	// MPI is gone: nothing it held will be written any more.
	for _, q := range m.owners {
		if q.op != nil {
			q.op.pin.Unpin()
		}
	}
	m.reqs, m.owners = nil, nil
	m.byePin.Unpin()
	m.staging.reset()
	mpiProcess.Lock()
	mpiProcess.state = mpiFinalized
	mpiProcess.Unlock()
	close(m.done)
}

// check aborts the job if an MPI call failed. MPI's default error handler,
// MPI_ERRORS_ARE_FATAL, which the backend keeps, has already done so before the call
// returns; this is a safety net, because a rank that went on alone would leave the others
// waiting in a collective it no longer runs.
func (m *mpiComm) check(rc C.int, what string) {
	if rc == 0 { // MPI_SUCCESS is 0 by the standard
		return
	}
	fmt.Fprintf(os.Stderr, "%v; aborting the MPI job\n", mpiError(fmt.Sprintf("rank %d: %s", m.rank, what), rc))
	C.ssf_abort(rc)
}

// mpiError turns an MPI error code into an error, nil for MPI_SUCCESS.
func mpiError(what string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	s := make([]byte, int(C.ssf_max_error_string()))
	var n C.int
	C.ssf_error_string(rc, (*C.char)(unsafe.Pointer(&s[0])), &n)
	return fmt.Errorf("dist: %s: MPI error %d: %s", what, int(rc), s[:n])
}

var _ dist.Communicator = (*mpiComm)(nil)
