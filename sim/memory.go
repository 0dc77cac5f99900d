package sim

import (
	"sync"

	"github.com/ssfusion/ssfusion/profile"
)

// Memory a lone simulated rank holds, in bytes per gradient element: the gradients it
// pushes (4), the pipeline's error-feedback memory or fused buffers (4), and room for the
// pipeline's other buffers and the runtime's slack (6). Measured: a BERT-base job of
// per-tensor sparsification at 256 workers, 110 M elements, peaks at 1.47 GB with the
// shared gradients (4 more bytes an element).
const jobBytesPerElement = 14

// JobMemory is what Sweep.MemoryLimit counts for one job of profile p: a lone rank's
// gradients, the pipeline's memory and buffers, and slack. The synthetic gradients the
// jobs of a profile share count once more, 4 bytes an element, while any of them runs.
func JobMemory(p *profile.Profile) int64 { return jobBytesPerElement * int64(p.Params()) }

// LoneMemory is what one job of profile p holds when it runs alone: JobMemory and the
// shared gradients. A budget below it still runs such a job, alone.
func LoneMemory(p *profile.Profile) int64 { return JobMemory(p) + gradientMemory(p) }

// gradientMemory is what the synthetic gradients of profile p hold: 4 bytes an element.
func gradientMemory(p *profile.Profile) int64 { return 4 * int64(p.Params()) }

// budget is a memory budget that jobs wait for: one may take n bytes when n fits beside
// what is taken, or when no job runs at all (so that a job larger than the whole budget
// still runs, alone).
type budget struct {
	limit int64 // 0: unlimited

	mu      sync.Mutex
	cond    *sync.Cond
	used    int64
	running int // jobs holding memory; shared gradients are not jobs
}

func newBudget(limit int64) *budget {
	b := &budget{limit: limit}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// take waits until n bytes fit and takes them; job says whether a job takes them.
func (b *budget) take(n int64, job bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.limit > 0 && b.used+n > b.limit && b.running > 0 {
		b.cond.Wait()
	}
	b.used += n
	if job {
		b.running++
	}
}

// give returns n bytes a job (or shared data) took.
func (b *budget) give(n int64, job bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if job {
		b.running--
	}
	b.cond.Broadcast()
}

// sharedGradients are the synthetic gradients the jobs of one profile share: made when
// the first of them starts, dropped when the last ends, and counted in the budget while
// they exist.
type sharedGradients struct {
	prof    *profile.Profile
	seed    uint64
	density float64
	budget  *budget

	mu    sync.Mutex
	grads *Gradients
	left  int // jobs of the profile still to end
}

func (g *sharedGradients) bytes() int64 { return gradientMemory(g.prof) }

// get returns the gradients, making them if they are not there.
func (g *sharedGradients) get() *Gradients {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.grads == nil {
		g.budget.take(g.bytes(), false)
		g.grads = NewGradients(g.prof, g.seed, g.density)
	}
	return g.grads
}

// done records that one of the profile's jobs ended, dropping the gradients after the last.
func (g *sharedGradients) done() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.left--
	if g.left == 0 && g.grads != nil {
		g.grads = nil
		g.budget.give(g.bytes(), false)
	}
}

// HeapLimit is the Go heap limit (debug.SetMemoryLimit) for a sweep of profiles whose jobs
// may hold memory bytes together. The runtime collects harder as the heap nears the
// limit, so that what the jobs no longer need does not add up past the budget; a job
// larger than the budget runs alone, and the limit leaves it room, lest the collector run
// without end. Memory outside Go's heap, and the collector's lag, keep a tenth.
func HeapLimit(memory int64, profiles []*profile.Profile) int64 {
	limit := memory * 9 / 10
	for _, p := range profiles {
		if lone := LoneMemory(p); lone > memory {
			limit = max(limit, lone*5/4)
		}
	}
	return limit
}
