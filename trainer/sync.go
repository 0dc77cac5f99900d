package trainer

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"unsafe"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/nets"
)

// What the ranks of a data-parallel job agree on besides gradients: the initial parameters,
// the BatchNorm statistics an evaluation uses, evaluation results and parameter checksums.
// In a single process every function here is a no-op.

func (r *run) distributed() bool { return r.comm != nil && r.world > 1 }

// broadcastInitial gives every rank rank 0's parameters and buffers, so that a job starts from
// one model even if initialisation ever differed between processes.
func (r *run) broadcastInitial() error {
	if !r.distributed() {
		return nil
	}
	if err := broadcastValues(r.comm, r.params); err != nil {
		return fmt.Errorf("broadcasting initial parameters: %w", err)
	}
	return r.broadcastBuffers()
}

// broadcastBuffers gives every rank rank 0's BatchNorm running statistics, which each rank
// otherwise estimates from its own batches (PyTorch DDP broadcasts them the same way), so
// that all ranks evaluate one model.
func (r *run) broadcastBuffers() error {
	if !r.distributed() {
		return nil
	}
	if err := broadcastValues(r.comm, r.model.Buffers()); err != nil {
		return fmt.Errorf("broadcasting BatchNorm statistics: %w", err)
	}
	return nil
}

func broadcastValues(comm dist.Communicator, ps []nets.Param) error {
	for _, p := range ps {
		if err := dist.BroadcastFloat32(comm, p.Value, 0); err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
	}
	return nil
}

// sumTallies adds up every rank's evaluation tally, in rank order, so that all ranks get the
// same float64 sums.
func (r *run) sumTallies(t tally) (tally, error) {
	if !r.distributed() {
		return t, nil
	}
	buf := make([]byte, 24)
	for i, v := range []float64{t.lossSum, t.correct, t.count} {
		binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(v))
	}
	all, err := r.comm.AllGatherV(buf)
	if err != nil {
		return tally{}, fmt.Errorf("combining evaluations: %w", err)
	}
	var sum tally
	for rank, b := range all {
		if len(b) != 24 {
			return tally{}, fmt.Errorf("combining evaluations: rank %d sent %d bytes, want 24", rank, len(b))
		}
		sum.lossSum += math.Float64frombits(binary.LittleEndian.Uint64(b))
		sum.correct += math.Float64frombits(binary.LittleEndian.Uint64(b[8:]))
		sum.count += math.Float64frombits(binary.LittleEndian.Uint64(b[16:]))
	}
	return sum, nil
}

// consistency records the parameter checksum comparisons of a job.
type consistency struct {
	Checks int
	Equal  bool
}

// checkConsistency compares the parameter checksums of all ranks every CheckEvery steps and
// after the last step; ranks that differ end the job, naming them.
func (r *run) checkConsistency(last bool) error {
	if !r.distributed() || r.cfg.CheckEvery <= 0 || (r.step%r.cfg.CheckEvery != 0 && !last) {
		return nil
	}
	mine := checksum(r.params)
	all, err := r.comm.AllGatherV(binary.LittleEndian.AppendUint64(nil, mine))
	if err != nil {
		return fmt.Errorf("comparing parameter checksums after step %d: %w", r.step, err)
	}
	r.checks.Checks++
	r.checks.Equal = true
	for rank, b := range all {
		if len(b) != 8 {
			return fmt.Errorf("comparing parameter checksums: rank %d sent %d bytes, want 8", rank, len(b))
		}
		if theirs := binary.LittleEndian.Uint64(b); theirs != mine {
			r.checks.Equal = false
			return fmt.Errorf("parameters differ across ranks after step %d: rank %d has checksum %016x, rank %d %016x",
				r.step, r.rank, mine, rank, theirs)
		}
	}
	return nil
}

// checksum hashes the bytes of every parameter: equal on all ranks when they agree bit for bit.
func checksum(params []nets.Param) uint64 {
	h := fnv.New64a()
	for _, p := range params {
		if len(p.Value) > 0 {
			h.Write(unsafe.Slice((*byte)(unsafe.Pointer(&p.Value[0])), 4*len(p.Value)))
		}
	}
	return h.Sum64()
}
