package baselines

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/fusion"
	"github.com/ssfusion/ssfusion/pipeline"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// PowerSGDConfig configures PowerSGD.
type PowerSGDConfig struct {
	// Rank is the rank of the approximation of every matrix-shaped gradient.
	Rank int
	// WarmupSteps are the first steps, which allreduce every gradient densely (the DDP
	// hook's start_powerSGD_iter).
	WarmupSteps int
	// ErrorFeedback keeps, per tensor, what the approximation missed and adds it to the next
	// step's gradient.
	ErrorFeedback bool
	// Seed draws the first Q factors, the same on every rank.
	Seed uint64
}

// powerSGDMinCompressionRate is how much smaller a matrix's factors must be than the matrix
// for it to be compressed: as the DDP hook's default min_compression_rate, a matrix whose
// factors would take more than half its size is allreduced whole.
const powerSGDMinCompressionRate = 2

// NewPowerSGD returns PowerSGD (Vogels et al., NeurIPS 2019) as PyTorch's DDP communication
// hook runs it, over Horovod's fusion buffers: each matrix-shaped gradient M (a convolution
// kernel viewed as out x in·k·k) is approximated by P Qᵀ of rank r with one power iteration
// from the previous step's Q (warm start): P = M Q, allreduced and orthonormalised, then
// Q = Mᵀ P, allreduced (averaged), and the step's gradient is P Qᵀ, which every rank
// computes alike. Each fusion buffer makes two allreduces: its dense tensors (vectors, and
// matrices too small to gain) with its P factors, then its Q factors. With error feedback
// each rank keeps M - P Qᵀ and adds it to the next gradient.
func NewPowerSGD(comm dist.Communicator, tensors []pipeline.Tensor, thresholdBytes int, cfg PowerSGDConfig) (pipeline.Pipeline, error) {
	if cfg.Rank < 1 {
		return nil, fmt.Errorf("powersgd: the approximation rank must be at least 1, got %d", cfg.Rank)
	}
	if cfg.WarmupSteps < 0 {
		return nil, fmt.Errorf("powersgd: warm-up steps must not be negative, got %d", cfg.WarmupSteps)
	}
	mats, err := powerSGDMatrices(tensors, cfg.Rank)
	if err != nil {
		return nil, err
	}
	p := &powerSGD{comm: comm, tensors: tensors, cfg: cfg, mats: mats}
	return fusion.New(comm, tensors, thresholdBytes, p, true)
}

// psgdMatrix is how PowerSGD sees a tensor: rows x cols, approximated at rank; rank 0 for a
// tensor sent whole.
type psgdMatrix struct{ rows, cols, rank int }

func powerSGDMatrices(tensors []pipeline.Tensor, maxRank int) ([]psgdMatrix, error) {
	mats := make([]psgdMatrix, len(tensors))
	for id, t := range tensors {
		if t.Shape == nil && t.Dims >= 2 {
			return nil, fmt.Errorf("powersgd: tensor %s has %d dimensions but no known shape (a profile records none), so it cannot be viewed as a matrix", t.Name, t.Dims)
		}
		if len(t.Shape) < 2 || t.Shape[0] <= 0 || len(t.Grad)%t.Shape[0] != 0 {
			continue
		}
		rows, cols := t.Shape[0], len(t.Grad)/t.Shape[0]
		r := min(rows, cols, maxRank)
		if (rows+cols)*r*powerSGDMinCompressionRate < rows*cols {
			mats[id] = psgdMatrix{rows: rows, cols: cols, rank: r}
		}
	}
	return mats, nil
}

type powerSGD struct {
	comm    dist.Communicator
	tensors []pipeline.Tensor
	cfg     PowerSGDConfig
	mats    []psgdMatrix // by tensor id
	e       fusion.Engine
	mem     *compress.Memory // the compressed tensors' M, then their residual
	qs      [][]float32      // by tensor id: the warm-started Q (cols x rank), nil for dense tensors
	buckets []*psgdBucket
}

// psgdBucket is a fusion buffer's worth of PowerSGD.
type psgdBucket struct {
	ids   []int               // its tensors, in buffer order
	dense *fusion.DenseBuffer // every tensor, for the dense warm-up steps
	a     []float32           // the dense tensors, then the compressed tensors' P factors
	aOff  []int               // by position in ids: where its gradient or its P starts in a
	b     []float32           // the compressed tensors' Q factors
	bOff  []int               // by position in ids: where its Q starts in b (-1: dense)
}

func (p *powerSGD) Plan(e fusion.Engine, buckets []fusion.Bucket) ([]int, bool, error) {
	p.e = e
	if p.mem == nil {
		sizes := make([]int, len(p.tensors))
		for id, m := range p.mats {
			sizes[id] = -1
			if m.rank > 0 {
				sizes[id] = m.rows * m.cols
			}
		}
		var err error
		if p.mem, err = compress.NewMemory(sizes, compress.Config{NoErrorFeedback: !p.cfg.ErrorFeedback}); err != nil {
			return nil, false, fmt.Errorf("powersgd: %w", err)
		}
		p.qs = p.initialQs()
	}
	p.buckets = p.buckets[:0]
	parts := make([]int, 0, 2*len(buckets))
	for _, bucket := range buckets {
		p.buckets = append(p.buckets, p.newBucket(bucket.Tensors))
		// The first collective waits for every tensor of the buffer, the second for the Q
		// factors computed once the first has completed.
		parts = append(parts, len(bucket.Tensors), 1)
	}
	return parts, false, nil
}

// initialQs draws every Q from a normal distribution, from the seed and the tensor id, so
// that every rank starts from the same factors.
func (p *powerSGD) initialQs() [][]float32 {
	qs := make([][]float32, len(p.tensors))
	for id, m := range p.mats {
		if m.rank == 0 {
			continue
		}
		rng := rand.New(rand.NewPCG(p.cfg.Seed, uint64(id)))
		qs[id] = make([]float32, m.cols*m.rank)
		for i := range qs[id] {
			qs[id][i] = float32(rng.NormFloat64())
		}
	}
	return qs
}

func (p *powerSGD) newBucket(ids []int) *psgdBucket {
	bk := &psgdBucket{ids: ids, dense: fusion.NewDenseBuffer(p.tensors, ids), aOff: make([]int, len(ids)), bOff: make([]int, len(ids))}
	na, nb := 0, 0
	for j, id := range ids { // dense tensors first, so that they sit together
		bk.bOff[j] = -1
		if p.mats[id].rank == 0 {
			bk.aOff[j] = na
			na += len(p.tensors[id].Grad)
		}
	}
	for j, id := range ids {
		if m := p.mats[id]; m.rank > 0 {
			bk.aOff[j], bk.bOff[j] = na, nb
			na += m.rows * m.rank
			nb += m.cols * m.rank
		}
	}
	bk.a, bk.b = make([]float32, na), make([]float32, nb)
	return bk
}

// compressing reports whether the current step compresses, after the warm-up steps.
func (p *powerSGD) compressing() bool { return p.e.Step() >= p.cfg.WarmupSteps }

func (p *powerSGD) Process(id int, s fusion.Slot, grad []float32) error {
	bk := p.buckets[s.Bucket]
	m := p.mats[id]
	switch {
	case !p.compressing():
		bk.dense.Put(s.Index, grad)
		p.e.Meter().Dense(len(grad))
	case m.rank == 0:
		copy(bk.a[bk.aOff[s.Index]:], grad)
		p.e.Meter().Dense(len(grad))
	default:
		acc, err := p.mem.Accumulate(id, grad) // M: the gradient plus what earlier steps missed
		if err != nil {
			return fmt.Errorf("powersgd: %w", err)
		}
		pf := bk.a[bk.aOff[s.Index] : bk.aOff[s.Index]+m.rows*m.rank]
		start := p.e.Clock().Now()
		gemm(blas.NoTrans, blas.NoTrans, matrixOf(acc, m.rows, m.cols), matrixOf(p.qs[id], m.cols, m.rank), matrixOf(pf, m.rows, m.rank))
		p.timed(start, m.rows*m.cols*m.rank)
		p.e.Meter().Dense((m.rows + m.cols) * m.rank)
	}
	p.e.Done(2 * s.Bucket)
	return nil
}

func (p *powerSGD) Issue(i int) fusion.Completion {
	bk := p.buckets[i/2]
	switch {
	case !p.compressing() && i%2 == 0:
		c := bk.dense.AllReduce(p.comm)
		p.e.Done(i + 1) // the second collective has nothing to send in a dense step
		return c
	case !p.compressing():
		return func() error { return nil }
	case i%2 == 1:
		return p.comm.AllReduceAsync(bk.b, dist.Average).Wait
	}
	h := p.comm.AllReduceAsync(bk.a, dist.Average)
	done := make(chan error, 1)
	go func() {
		err := h.Wait()
		if err != nil {
			// The second collective will never be ready: stop the step rather than wait.
			p.e.Fail(fmt.Errorf("collective %d of the step: %w", i, err))
		} else {
			p.computeQs(bk)
			p.e.Done(i + 1)
		}
		done <- err
	}()
	return sync.OnceValue(func() error { return <-done })
}

// computeQs orthonormalises every compressed tensor's averaged P and computes its Q = Mᵀ P,
// to be averaged by the buffer's second allreduce.
func (p *powerSGD) computeQs(bk *psgdBucket) {
	for j, id := range bk.ids {
		m := p.mats[id]
		if m.rank == 0 {
			continue
		}
		pf := bk.a[bk.aOff[j] : bk.aOff[j]+m.rows*m.rank]
		start := p.e.Clock().Now()
		orthonormalize(pf, m.rows, m.rank)
		qf := bk.b[bk.bOff[j] : bk.bOff[j]+m.cols*m.rank]
		gemm(blas.Trans, blas.NoTrans, matrixOf(p.mem.Residual(id), m.rows, m.cols), matrixOf(pf, m.rows, m.rank), matrixOf(qf, m.cols, m.rank))
		p.timed(start, m.rows*m.rank*m.rank+m.rows*m.cols*m.rank)
	}
}

// timed ends a product of n multiply-adds (an orthonormalisation counted as its
// multiply-adds) that began at start, and records its time as the step's compression,
// which the simulator's model of compress.LowRankKind predicts under a virtual clock.
func (p *powerSGD) timed(start time.Time, n int) {
	p.e.Meter().Selected(p.e.Clock().Work(start, compress.LowRankKind, n), 0, 0)
}

func (p *powerSGD) Finish() error {
	for _, bk := range p.buckets {
		if !p.compressing() {
			bk.dense.Unpack(p.tensors)
			continue
		}
		for j, id := range bk.ids {
			m, g := p.mats[id], p.tensors[id].Grad
			if m.rank == 0 {
				copy(g, bk.a[bk.aOff[j]:bk.aOff[j]+len(g)])
				continue
			}
			qf := bk.b[bk.bOff[j] : bk.bOff[j]+m.cols*m.rank]
			copy(p.qs[id], qf) // the next step's power iteration starts from it
			pf := bk.a[bk.aOff[j] : bk.aOff[j]+m.rows*m.rank]
			start := p.e.Clock().Now()
			gemm(blas.NoTrans, blas.Trans, matrixOf(pf, m.rows, m.rank), matrixOf(qf, m.cols, m.rank), matrixOf(g, m.rows, m.cols))
			p.timed(start, m.rows*m.cols*m.rank)
			if p.cfg.ErrorFeedback {
				// The residual is what this rank's M holds beyond the step's gradient.
				acc := p.mem.Residual(id)
				for k, v := range g {
					acc[k] -= v
				}
			}
		}
	}
	return nil
}

func (p *powerSGD) Close() error { return nil }

// Memory returns the error-feedback memory, nil before the plan; checkpoints read it.
func (p *powerSGD) Memory() *compress.Memory { return p.mem }

func matrixOf(data []float32, rows, cols int) blas32.General {
	return blas32.General{Rows: rows, Cols: cols, Stride: cols, Data: data}
}

// gemm sets c to op(a)·op(b).
func gemm(ta, tb blas.Transpose, a, b, c blas32.General) { blas32.Gemm(ta, tb, 1, a, b, 0, c) }

// orthonormalize makes the columns of the rows x cols matrix m orthonormal by Gram-Schmidt,
// in column order, as the DDP hook does; sums are taken in float64. A zero column stays zero
// rather than becoming NaN: its direction carries nothing of the gradient.
func orthonormalize(m []float32, rows, cols int) {
	for c := range cols {
		norm := 0.0
		for r := range rows {
			v := float64(m[r*cols+c])
			norm += v * v
		}
		norm = math.Sqrt(norm)
		if norm < 1e-30 {
			for r := range rows {
				m[r*cols+c] = 0
			}
			continue
		}
		for r := range rows {
			m[r*cols+c] = float32(float64(m[r*cols+c]) / norm)
		}
		for d := c + 1; d < cols; d++ {
			dot := 0.0
			for r := range rows {
				dot += float64(m[r*cols+c]) * float64(m[r*cols+d])
			}
			for r := range rows {
				m[r*cols+d] = float32(float64(m[r*cols+d]) - dot*float64(m[r*cols+c]))
			}
		}
	}
}

// powerSGDStateMagic starts PowerSGD's state in a checkpoint, with its version.
const powerSGDStateMagic = "PSGD\x01"

// ExtraState implements fusion.ExtraStater: every compressed tensor's warm-started Q, which
// a resumed run needs to continue exactly. The layout is the magic, the number of factors,
// then per factor its tensor id, its length and its float32 values, little-endian.
func (p *powerSGD) ExtraState() ([]byte, error) {
	if p.qs == nil {
		return nil, nil
	}
	out := []byte(powerSGDStateMagic)
	count := 0
	for _, q := range p.qs {
		if q != nil {
			count++
		}
	}
	out = binary.LittleEndian.AppendUint32(out, uint32(count))
	for id, q := range p.qs {
		if q == nil {
			continue
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(id))
		out = binary.LittleEndian.AppendUint32(out, uint32(len(q)))
		for _, v := range q {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
	}
	return out, nil
}

// RestoreExtra implements fusion.ExtraStater: it adopts the Q factors of a checkpoint after
// checking that they are this pipeline's, factor by factor.
func (p *powerSGD) RestoreExtra(b []byte) error {
	rest, ok := bytes.CutPrefix(b, []byte(powerSGDStateMagic))
	if !ok {
		return fmt.Errorf("powersgd state: does not start with its magic and version 1")
	}
	read := func(what string) (uint32, error) {
		if len(rest) < 4 {
			return 0, fmt.Errorf("powersgd state: cut short before %s", what)
		}
		v := binary.LittleEndian.Uint32(rest)
		rest = rest[4:]
		return v, nil
	}
	count, err := read("the number of factors")
	if err != nil {
		return err
	}
	qs := make([][]float32, len(p.qs))
	for range count {
		id, err := read("a tensor id")
		if err != nil {
			return err
		}
		n, err := read("a factor's length")
		if err != nil {
			return err
		}
		if int(id) >= len(p.qs) || p.qs[id] == nil || len(p.qs[id]) != int(n) || qs[id] != nil {
			return fmt.Errorf("powersgd state: a factor of %d values for tensor %d, which this model compresses differently", n, id)
		}
		if len(rest) < 4*int(n) {
			return fmt.Errorf("powersgd state: tensor %d's factor is cut short", id)
		}
		qs[id] = make([]float32, n)
		for i := range qs[id] {
			v := math.Float32frombits(binary.LittleEndian.Uint32(rest[4*i:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("powersgd state: tensor %d's factor holds %v", id, v)
			}
			qs[id][i] = v
		}
		rest = rest[4*n:]
	}
	for id, q := range p.qs {
		if q != nil && qs[id] == nil {
			return fmt.Errorf("powersgd state: no factor for tensor %d", id)
		}
	}
	if len(rest) != 0 {
		return fmt.Errorf("powersgd state: %d bytes after the last factor", len(rest))
	}
	p.qs = qs
	return nil
}
