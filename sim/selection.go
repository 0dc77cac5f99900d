package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/ssfusion/ssfusion/compress"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// Linear is a cost that grows linearly with the number of elements n:
// PerCallNS + PerElementNS·n nanoseconds. Selection reads the whole tensor at least once,
// so its time is close to linear in n; the per-call term keeps the many small tensors of a
// per-tensor pipeline from costing nothing.
type Linear struct {
	PerCallNS    float64
	PerElementNS float64
}

// At returns the cost of one call on n elements.
func (l Linear) At(n int) time.Duration {
	return time.Duration(math.Round(l.PerCallNS + l.PerElementNS*float64(n)))
}

// Step is a fixed cost that calls on at least From elements pay on top of their Linear
// cost: an implementation that changes algorithm at a size, as GPU top-k goes from one
// kernel to seventeen (see GPUSelectionModel). A Step with From of 0 or less adds nothing.
type Step struct {
	From    int
	ExtraNS float64
}

// SelectionModel predicts how long one selection takes, by the kind of selection: the
// pipeline selector names ("topk", "dgc" and its alias "sampled", "gaussiank", "randomk"),
// "threshold", the plain scan comparing |x| with a threshold that ExDyna runs over its
// partition (so a simulator asks for Time("threshold", n/P), not n), and "lowrank", one of
// PowerSGD's matrix products, whose n counts multiply-adds. Steps, which may be nil, adds
// a Step to the Linear cost of the kinds it names.
type SelectionModel struct {
	Kinds map[string]Linear
	Steps map[string]Step
}

// Time returns the time of one selection of kind on a tensor of n elements. A kind the
// model does not know costs what "topk" costs, the default selector, so that a
// configuration naming a selector the model was not fitted for still simulates with a
// plausible cost rather than a free one. An empty tensor is not selected from and costs 0.
func (m SelectionModel) Time(kind string, n int) time.Duration {
	if n <= 0 {
		return 0
	}
	if _, ok := m.Kinds[kind]; !ok {
		kind = "topk"
	}
	d := m.Kinds[kind].At(n)
	if s := m.Steps[kind]; s.From > 0 && n >= s.From {
		d += time.Duration(math.Round(s.ExtraNS))
	}
	return d
}

// Scaled returns the model of a machine speed times as fast: every time is divided by
// speed. It panics unless speed is positive and finite; a zero or negative speed is a
// configuration mistake that would otherwise turn into zero or negative times far away.
func (m SelectionModel) Scaled(speed float64) SelectionModel {
	if !(speed > 0) || math.IsInf(speed, 0) {
		panic(fmt.Sprintf("sim: selection model scaled by %v, want a positive finite speed", speed))
	}
	slower := func(ns float64) float64 { return ns / speed }
	return m.rescaled(slower, slower)
}

// rescaled returns the model with every per-call cost (Steps' included) put through call
// and every per-element cost through element, in new maps: the caller's model must not
// change under it.
func (m SelectionModel) rescaled(call, element func(float64) float64) SelectionModel {
	kinds := make(map[string]Linear, len(m.Kinds))
	for k, l := range m.Kinds {
		kinds[k] = Linear{PerCallNS: call(l.PerCallNS), PerElementNS: element(l.PerElementNS)}
	}
	var steps map[string]Step
	if m.Steps != nil {
		steps = make(map[string]Step, len(m.Steps))
		for k, s := range m.Steps {
			steps[k] = Step{From: s.From, ExtraNS: call(s.ExtraNS)}
		}
	}
	return SelectionModel{Kinds: kinds, Steps: steps}
}

// DefaultSelectionModel returns the selection times of this project's selectors on the
// development machine (2 cores, GOMAXPROCS=2) at density 0.01. Density matters little for
// the threshold selectors, but randomk's draw costs O(k), so at other densities these are
// an approximation; refit for another density or machine, or scale with Scaled. The
// selectors' lines come from
//
//	go run ./tools/fit-selection -density 0.01 -max 4000000 -min 1000 -reps 11 -runs 9 -sizes 8
//
// (sizes 1000 to 4000000, 8 log-spaced, the fastest of 9 medians each; fit to relative
// error, see FitLinear), and PowerSGD's products ("lowrank", n multiply-adds of a rank-2
// product, which gonum's Gemm computes) from
//
//	go run ./tools/fit-selection -kinds lowrank -runs 5
//
// A line cannot follow every selector exactly. dgc's is a compromise between two regimes:
// below 131072 elements the sampled threshold hands the selection to topk (too few elements
// for sampling to pay), above it the sampled threshold is cheaper per element, so the line
// is low below that size and high above it. gaussiank slows per element once its passes no
// longer find the gradient in cache, from about 1M elements, so the line is low at the
// largest sizes. On thin products Gemm is cheaper per element while M stays in cache, so
// lowrank's line is high for mid-sized matrices. Sizes past the largest fitted are
// extrapolated.
//
// Each call returns a new map, which the caller may change.
func DefaultSelectionModel() SelectionModel {
	dgc := Linear{PerCallNS: 466.7, PerElementNS: 1.039}
	return SelectionModel{Kinds: map[string]Linear{
		"topk":      {PerCallNS: 163.8, PerElementNS: 1.4},
		"dgc":       dgc,
		"sampled":   dgc, // NewSelector's alias for dgc
		"gaussiank": {PerCallNS: 282.6, PerElementNS: 1.023},
		"randomk":   {PerCallNS: 23.87, PerElementNS: 0.4538},
		"threshold": {PerCallNS: 0, PerElementNS: 0.7119},
		"lowrank":   {PerCallNS: 1158, PerElementNS: 2.904},
	}}
}

// minBatch is the least time one timed batch of calls lasts in MeasureSelection: long
// enough that the clock's resolution and the cost of reading it are noise even for a
// selection of a thousand elements, which takes about a microsecond.
const minBatch = time.Millisecond

// MeasureSelection returns the time of one selection of kind on n elements at density
// (k = compress.KFor(n, density)), on standard normal data: the median over reps batches
// of calls, after one warm-up call that grows the selector's scratch and the result to
// their final size and tells how many calls make a batch of at least minBatch. Nothing is
// allocated inside the timed batches (except what the selector allocates itself), and a
// garbage collection runs before them so that none is pending.
//
// kind is a compress.NewSelector name, "threshold", the scan ExDyna runs, with a
// threshold that picks a density fraction of the elements, or "lowrank", a rank-2 product
// of n multiply-adds as PowerSGD computes (density does not matter to it).
func MeasureSelection(kind string, n int, density float64, reps int) (time.Duration, error) {
	if n <= 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("sim: measuring selection on %d elements", n)
	}
	if !(density > 0 && density <= 1) {
		return 0, fmt.Errorf("sim: measuring selection at density %v, want (0, 1]", density)
	}
	if reps < 1 {
		return 0, fmt.Errorf("sim: measuring selection with %d repetitions", reps)
	}
	run, err := selection(kind, normalData(n), compress.KFor(n, density), density)
	if err != nil {
		return 0, err
	}

	start := time.Now()
	if err := run(); err != nil {
		return 0, fmt.Errorf("sim: warming up %s on %d elements: %w", kind, n, err)
	}
	// The warm-up is slower than the calls after it (page faults, cold caches), so this
	// errs towards short batches, still far above the clock's resolution.
	batch := int(max(1, minBatch/max(time.Since(start), 1)))
	runtime.GC()

	times := make([]time.Duration, reps)
	for i := range times {
		start := time.Now()
		for range batch {
			if err := run(); err != nil {
				return 0, fmt.Errorf("sim: timing %s on %d elements: %w", kind, n, err)
			}
		}
		times[i] = time.Since(start) / time.Duration(batch)
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}

// selection returns one selection of kind on g picking about k elements, with its scratch
// held by the closure so that calls after the first allocate nothing.
func selection(kind string, g []float32, k int, density float64) (func() error, error) {
	if kind == compress.LowRankKind {
		return lowRankProduct(len(g)), nil
	}
	if kind == compress.ThresholdKind {
		tau := threshold(density)
		var send []byte
		return func() error {
			send = compress.AppendAtLeast(send[:0], g, 0, tau)
			return nil
		}, nil
	}
	sel, err := compress.NewSelector(kind, 1)
	if err != nil {
		return nil, err
	}
	var idx []int32
	return func() error {
		idx, err = sel.Select(g, k, idx)
		return err
	}, nil
}

// lowRankRank is the rank of the products MeasureSelection times for compress.LowRankKind:
// PowerSGD's usual rank, and the one the experiments here run.
const lowRankRank = 2

// lowRankProduct returns one product P = MQ of about n multiply-adds, as PowerSGD computes
// it: M an almost square matrix of n/lowRankRank elements, Q of lowRankRank columns.
func lowRankProduct(n int) func() error {
	cols := max(1, int(math.Sqrt(float64(n)/lowRankRank)))
	rows := max(1, n/(lowRankRank*cols))
	m := blas32.General{Rows: rows, Cols: cols, Stride: cols, Data: normalData(rows * cols)}
	q := blas32.General{Rows: cols, Cols: lowRankRank, Stride: lowRankRank, Data: normalData(cols * lowRankRank)}
	p := blas32.General{Rows: rows, Cols: lowRankRank, Stride: lowRankRank, Data: make([]float32, rows*lowRankRank)}
	return func() error {
		blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, m, q, 0, p)
		return nil
	}
}

// normalData returns n standard normal elements, the same for a given n whatever the kind,
// so that the kinds are timed on equal terms.
func normalData(n int) []float32 {
	r := rand.New(rand.NewPCG(uint64(n), 0x5e1ec7))
	g := make([]float32, n)
	for i := range g {
		g[i] = float32(r.NormFloat64())
	}
	return g
}

// threshold returns the threshold that keeps a density fraction of standard normal data,
// as ExDyna's adapted threshold does once settled: for such data
// P(|x| > t) = 1 − erf(t/√2).
func threshold(density float64) float32 {
	return float32(math.Sqrt2 * math.Erfinv(1-density))
}

// FitSelection measures kind (see MeasureSelection) at each of sizes and fits a Linear to
// the times with FitLinear.
func FitSelection(kind string, sizes []int, density float64, reps int) (Linear, error) {
	times := make([]time.Duration, len(sizes))
	for i, n := range sizes {
		var err error
		if times[i], err = MeasureSelection(kind, n, density, reps); err != nil {
			return Linear{}, err
		}
	}
	return FitLinear(sizes, times)
}

// FitLinear fits time = a + b·n to the points (sizes[i], times[i]) by least squares on the
// relative error, each squared residual weighted by 1/times[i]²: sizes spread over
// decades, and a plain fit would spend itself on the largest and leave the smallest, the
// per-call term, to chance. If the best a is negative it is clamped to 0 and b refitted, as
// no call takes negative time. It needs two distinct sizes and positive times.
func FitLinear(sizes []int, times []time.Duration) (Linear, error) {
	if len(sizes) != len(times) {
		return Linear{}, fmt.Errorf("sim: fitting %d sizes to %d times", len(sizes), len(times))
	}
	var s, sx, sy, sxx, sxy float64
	for i, n := range sizes {
		if times[i] <= 0 {
			return Linear{}, fmt.Errorf("sim: fitting a non-positive time %v at size %d", times[i], n)
		}
		x, y := float64(n), float64(times[i])
		w := 1 / (y * y)
		s += w
		sx += w * x
		sy += w * y
		sxx += w * x * x
		sxy += w * x * y
	}
	// det is s² times the weighted variance of the sizes, so it vanishes exactly when they
	// are all equal; the relative test allows for rounding.
	det := s*sxx - sx*sx
	if len(sizes) < 2 || det <= 1e-12*s*sxx {
		return Linear{}, errors.New("sim: fitting a line needs at least two distinct sizes")
	}
	b := (s*sxy - sx*sy) / det
	a := (sy - b*sx) / s
	if a < 0 {
		a, b = 0, sxy/sxx
	}
	return Linear{PerCallNS: a, PerElementNS: b}, nil
}

// WithTopK returns the model with top-k's line at callNS per call and elementNS per
// element, and every other kind's per-call and per-element costs (its Steps with the
// per-call ones) scaled by the same factors as top-k's: the same hardware, dearer or
// cheaper. It panics unless m has a top-k line with both costs positive and the new
// costs are positive and finite, all of which a map's sweep checks first.
func (m SelectionModel) WithTopK(callNS, elementNS float64) SelectionModel {
	top := m.Kinds["topk"]
	call, element := callNS/top.PerCallNS, elementNS/top.PerElementNS
	for _, f := range []float64{call, element} {
		if !(f > 0) || math.IsInf(f, 0) {
			panic(fmt.Sprintf("sim: top-k line %+v rescaled to %g ns a call and %g ns an element", top, callNS, elementNS))
		}
	}
	return m.rescaled(func(ns float64) float64 { return ns * call }, func(ns float64) float64 { return ns * element })
}
