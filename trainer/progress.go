package trainer

import (
	"fmt"

	"github.com/schollz/progressbar/v3"
)

// progress shows an epoch's steps: a bar on a terminal, a log line every LogEvery steps
// otherwise.
type progress struct {
	bar      *progressbar.ProgressBar
	logf     func(string, ...any)
	every    int
	epoch    int
	done     int
	steps    int
	interval float64 // seconds since the last log line
	samples  int
}

// newProgress starts the display of an epoch of steps; logEvery 0 logs only the epoch's end.
func newProgress(opts Options, logEvery, epoch, steps int) *progress {
	p := &progress{logf: opts.Logf, every: logEvery, epoch: epoch, steps: steps}
	if opts.Progress != nil {
		p.bar = progressbar.NewOptions(steps,
			progressbar.OptionSetWriter(opts.Progress),
			progressbar.OptionSetDescription(fmt.Sprintf("epoch %d", epoch+1)),
			progressbar.OptionShowCount(),
			progressbar.OptionSetItsString("step"),
			progressbar.OptionShowIts(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(200e6),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
}

func (p *progress) update(row Row, samplesPerBatch int) {
	p.done++
	p.interval += row.StepMS.Total / 1000
	p.samples += samplesPerBatch
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("epoch %d loss %.4g", p.epoch+1, row.Loss))
		p.bar.Add(1)
		return
	}
	if (p.every > 0 && p.done%p.every == 0) || p.done == p.steps {
		p.logf("epoch %d step %d/%d loss %.4g lr %.4g %.1f samples/s", p.epoch+1, p.done, p.steps,
			row.Loss, row.LR, float64(p.samples)/p.interval)
		p.interval, p.samples = 0, 0
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
	}
}
