package fusion

import (
	"sync"
	"time"

	"github.com/ssfusion/ssfusion/pipeline"
)

// Pool runs jobs on a fixed set of goroutines. Sparsifying pipelines use it to take
// selection off the goroutine that runs backward, so that selection overlaps the rest of
// the backward pass and the communication of earlier buffers.
type Pool struct {
	clock pipeline.Clock
	jobs  chan poolJob
	wg    sync.WaitGroup
}

// poolJob is a job and when it was submitted: a worker's clock joins that time before the
// job runs, so that on a virtual clock the job starts after its cause.
type poolJob struct {
	job int
	at  time.Time
}

// NewPool starts workers goroutines that call work(worker, job) for each submitted job;
// worker in [0, workers) lets work keep per-goroutine scratch such as a Selector. capacity
// is how many jobs may wait without blocking Submit. Jobs run on clock's time.
func NewPool(clock pipeline.Clock, workers, capacity int, work func(worker, job int)) *Pool {
	p := &Pool{clock: clock, jobs: make(chan poolJob, capacity)}
	for w := range max(workers, 1) {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for j := range p.jobs {
				p.clock.Join(j.at)
				work(w, j.job)
			}
		}()
	}
	return p
}

// Submit queues a job.
func (p *Pool) Submit(job int) { p.jobs <- poolJob{job: job, at: p.clock.Now()} }

// Close lets the workers finish the queued jobs and waits for them.
func (p *Pool) Close() {
	close(p.jobs)
	p.wg.Wait()
}
