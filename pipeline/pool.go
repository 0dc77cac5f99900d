package pipeline

import "sync"

// Pool runs jobs on a fixed set of goroutines. Sparsifying pipelines use it to take
// selection off the goroutine that runs backward, so that selection overlaps the rest of
// the backward pass and the communication of earlier buffers.
type Pool struct {
	jobs chan int
	wg   sync.WaitGroup
}

// NewPool starts workers goroutines that call work(worker, job) for each submitted job;
// worker in [0, workers) lets work keep per-goroutine scratch such as a Selector. capacity
// is how many jobs may wait without blocking Submit.
func NewPool(workers, capacity int, work func(worker, job int)) *Pool {
	p := &Pool{jobs: make(chan int, capacity)}
	for w := range max(workers, 1) {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for job := range p.jobs {
				work(w, job)
			}
		}()
	}
	return p
}

// Submit queues a job.
func (p *Pool) Submit(job int) { p.jobs <- job }

// Close lets the workers finish the queued jobs and waits for them.
func (p *Pool) Close() {
	close(p.jobs)
	p.wg.Wait()
}
