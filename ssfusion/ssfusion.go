// Package ssfusion is SSFusion's gradient pipeline: tensor fusion with selective
// sparsification. Inside each fusion buffer only the tensors for which sparsification pays
// off are sparsified, each on its own (so no tensor goes missing); the others stay dense.
// Each buffer is split into a dense part, averaged by allreduce, and a sparse part,
// exchanged by allgather (fusion separation). Selection can run on a goroutine pool while
// backward goes on (offloading), and the dense and sparse collectives of successive buffers
// can be interleaved so that they overlap instead of queueing.
package ssfusion

import (
	"errors"
	"fmt"
	"math"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/fusion"
	"github.com/ssfusion/ssfusion/netmodel"
	"github.com/ssfusion/ssfusion/pipeline"
)

// Config configures the pipeline.
type Config struct {
	compress.Config
	// Rule picks the tensors that may be sparsified (see Candidates): by size (the
	// default), by their parameters' dimensions as the authors' code does, or by the cost
	// model alone.
	Rule      Rule
	Threshold int // under the size rule, tensors with fewer elements stay dense
	// Network is the network the chooser weighs sparsifying a tensor against keeping it
	// dense on (see Choose), selection costing SelectPerElement seconds per element; nil
	// leaves the rule alone in charge. The rank rule never consults it; the cost rule
	// needs it.
	Network          *netmodel.Network
	SelectPerElement float64
	// Offload runs selection on SelectWorkers goroutines instead of the one pushing
	// gradients (SSFusion-O).
	Offload       bool
	SelectWorkers int
	// Interleave lets dense and sparse collectives overlap, the sparse part of a buffer
	// issued after the dense part of the next (SSFusion-I). Without it the step's
	// collectives run one at a time, each buffer's dense part then its sparse part.
	Interleave bool
}

// New returns SSFusion over comm with fusion buffers of up to thresholdBytes.
func New(comm dist.Communicator, tensors []pipeline.Tensor, thresholdBytes int, cfg Config) (pipeline.Pipeline, error) {
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("ssfusion: %w", err)
	}
	if cfg.Threshold < 0 {
		return nil, fmt.Errorf("ssfusion: select threshold must not be negative, got %d", cfg.Threshold)
	}
	if cfg.Rule < BySize || cfg.Rule > ByCost {
		return nil, fmt.Errorf("ssfusion: unknown select rule %v", cfg.Rule)
	}
	if cfg.Rule == ByCost && cfg.Network == nil {
		return nil, errors.New("ssfusion: the cost rule leaves the choice to the cost model, which needs a network to plan on")
	}
	if cfg.Network != nil {
		if err := cfg.Network.Check(); err != nil {
			return nil, fmt.Errorf("ssfusion: the chooser's %w", err)
		}
	}
	if !(cfg.SelectPerElement >= 0) || math.IsInf(cfg.SelectPerElement, 0) {
		return nil, fmt.Errorf("ssfusion: selection cost per element must be finite and not negative, got %g s", cfg.SelectPerElement)
	}
	if cfg.Rule == ByRank {
		// Taking a tensor of unknown shape for not 2-D would sparsify it, and with no
		// shapes known at all the rule would be per-tensor sparsification by another name.
		for _, t := range tensors {
			if t.Dims == 0 {
				return nil, fmt.Errorf("ssfusion: the rank rule needs every tensor's dimensions, and tensor %s has none (a profile measured before dimensions were recorded: measure it again with train --profile-out)", t.Name)
			}
		}
	}
	s := &stage{comm: comm, tensors: tensors, cfg: cfg}
	return fusion.New(comm, tensors, thresholdBytes, s, true)
}

// collective is one entry of a step's schedule: the dense or the sparse part of a buffer.
type collective struct {
	bucket int
	sparse bool
}

// role says what happens to one tensor: it joins the dense or sparse part of buffer bucket
// at position index, whose collective is coll.
type role struct {
	sparse              bool
	bucket, index, coll int
}

type stage struct {
	comm    dist.Communicator
	tensors []pipeline.Tensor
	cfg     Config
	e       fusion.Engine

	roles    []role // by tensor id
	schedule []collective
	dense    []*fusion.DenseBuffer  // by bucket; nil without a dense part
	sparse   []*fusion.SparseBuffer // by bucket; nil without a sparse part
	c        *compress.Compressor   // one selector per selecting goroutine
	pool     *fusion.Pool
}

// Memory returns the error-feedback memory of the sparsified tensors, nil before the plan;
// checkpoints read it.
func (s *stage) Memory() *compress.Memory { return s.c.Memory() }

func (s *stage) Plan(e fusion.Engine, buckets []fusion.Bucket) ([]int, bool, error) {
	s.e = e
	s.roles = make([]role, len(s.tensors))
	memSizes := make([]int, len(s.tensors))
	denseIDs := make([][]int, len(buckets))
	sparseIDs := make([][]int, len(buckets))
	for b, bucket := range buckets {
		sizes := make([]int, len(bucket.Tensors))
		dims := make([]int, len(bucket.Tensors))
		for i, id := range bucket.Tensors {
			sizes[i], dims[i] = len(s.tensors[id].Grad), s.tensors[id].Dims
		}
		chosen := Candidates(s.cfg.Rule, sizes, dims, s.cfg.Threshold)
		if s.cfg.Rule != ByRank {
			chosen = Choose(chosen, sizes, s.cfg.Density, s.cfg.Network, s.cfg.SelectPerElement, s.comm.Size())
		}
		for i, id := range bucket.Tensors {
			// Under momentum correction the optimizer runs without momentum, so the dense
			// tensors need theirs from the memory too.
			memSizes[id] = -1
			if chosen[i] || s.cfg.Momentum > 0 {
				memSizes[id] = sizes[i]
			}
			if chosen[i] {
				s.roles[id] = role{sparse: true, bucket: b, index: len(sparseIDs[b])}
				sparseIDs[b] = append(sparseIDs[b], id)
			} else {
				s.roles[id] = role{bucket: b, index: len(denseIDs[b])}
				denseIDs[b] = append(denseIDs[b], id)
			}
		}
	}
	s.dense = make([]*fusion.DenseBuffer, len(buckets))
	s.sparse = make([]*fusion.SparseBuffer, len(buckets))
	for b := range buckets {
		if len(denseIDs[b]) > 0 {
			s.dense[b] = fusion.NewDenseBuffer(s.tensors, denseIDs[b])
		}
		if len(sparseIDs[b]) > 0 {
			s.sparse[b] = fusion.NewSparseBuffer(s.tensors, sparseIDs[b])
		}
	}
	s.schedule = schedule(len(buckets), func(b int) bool { return s.dense[b] != nil }, func(b int) bool { return s.sparse[b] != nil }, s.cfg.Interleave)
	parts := make([]int, len(s.schedule))
	for i, c := range s.schedule {
		ids := denseIDs[c.bucket]
		if c.sparse {
			ids = sparseIDs[c.bucket]
		}
		parts[i] = len(ids)
		for _, id := range ids {
			s.roles[id].coll = i
		}
	}
	if err := s.startSelectors(memSizes); err != nil {
		return nil, false, err
	}
	return parts, !s.cfg.Interleave, nil
}

// schedule orders a step's collectives. Interleaved, the sparse part of buffer b follows
// the dense part of buffer b+1, so that selection of b overlaps that allreduce and the dense
// and sparse transfers overlap in flight; otherwise each buffer's dense part comes before
// its sparse part.
func schedule(buckets int, hasDense, hasSparse func(b int) bool, interleave bool) []collective {
	var out []collective
	for b := range buckets {
		if hasDense(b) {
			out = append(out, collective{bucket: b})
		}
		if interleave && b > 0 && hasSparse(b-1) {
			out = append(out, collective{bucket: b - 1, sparse: true})
		}
		if !interleave && hasSparse(b) {
			out = append(out, collective{bucket: b, sparse: true})
		}
	}
	if interleave && buckets > 0 && hasSparse(buckets-1) {
		out = append(out, collective{bucket: buckets - 1, sparse: true})
	}
	return out
}

// startSelectors makes the compressor, with one selector per selecting goroutine, and
// starts the pool that offloads selection.
func (s *stage) startSelectors(memSizes []int) error {
	workers := 1
	if s.cfg.Offload {
		workers = max(1, s.cfg.SelectWorkers)
	}
	sels := make([]compress.Selector, workers)
	for w := range sels {
		// Seeds differ by rank and worker; the exact selector ignores them.
		var err error
		if sels[w], err = compress.NewSelector(s.cfg.Selector, s.cfg.Seed+uint64(s.comm.Rank())<<16+uint64(w)); err != nil {
			return err
		}
	}
	var err error
	if s.c, err = fusion.NewCompressor(s.e, s.cfg.Config, memSizes, sels...); err != nil {
		return err
	}
	if s.cfg.Offload {
		s.pool = fusion.NewPool(s.e.Clock(), workers, len(s.tensors), func(w, id int) { s.selectTensor(w, id) })
	}
	return nil
}

func (s *stage) Process(id int, _ fusion.Slot, grad []float32) error {
	r := s.roles[id]
	if !r.sparse {
		sent, err := s.c.Memory().Momentum(id, grad)
		if err != nil {
			return err
		}
		s.dense[r.bucket].Put(r.index, sent)
		s.e.Meter().Dense(len(grad))
		s.e.Done(r.coll)
		return nil
	}
	// Accumulating copies the gradient, which is valid only during this call, so the rest
	// of the work can move to the pool.
	if err := s.c.Accumulate(id, grad); err != nil {
		return err
	}
	if s.pool != nil {
		s.pool.Submit(id)
		return nil
	}
	return s.selectTensor(0, id)
}

// selectTensor sparsifies tensor id's accumulated gradient into its buffer's sparse part
// with selector w. Run from the pool, its error stops the step.
func (s *stage) selectTensor(w, id int) error {
	r := s.roles[id]
	if err := s.c.Select(w, id, &s.sparse[r.bucket].Parts[r.index]); err != nil {
		s.e.Fail(err)
		return err
	}
	s.e.Done(r.coll)
	return nil
}

func (s *stage) Issue(i int) fusion.Completion {
	c := s.schedule[i]
	if c.sparse {
		return s.sparse[c.bucket].AllGather(s.comm)
	}
	return s.dense[c.bucket].AllReduce(s.comm)
}

func (s *stage) Finish() error {
	for b := range s.dense {
		if s.dense[b] != nil {
			s.dense[b].Unpack(s.tensors)
		}
		if s.sparse[b] != nil {
			if err := s.sparse[b].Average(); err != nil {
				return fmt.Errorf("fusion buffer %d: %w", b, err)
			}
		}
	}
	return nil
}

func (s *stage) Close() error {
	if s.pool != nil {
		s.pool.Close()
		s.pool = nil
	}
	return nil
}
