package trainer

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// liveMetrics keeps metrics.csv up to date while a run goes on: every row is appended as it
// is made, in one write of whole lines, so that plot, a spreadsheet or tail can follow a
// running experiment. At the end writeOutputs replaces the file whole, atomically; a
// reader of the live file may at most see a last line cut short by a crash.
type liveMetrics struct {
	f   *os.File
	buf bytes.Buffer
	w   *csv.Writer
}

// openLiveMetrics starts dir/metrics.csv afresh with the rows a resumed run already has,
// atomically, and opens it to append the next ones.
func openLiveMetrics(dir string, rows []Row) (*liveMetrics, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating output folder: %w", err)
	}
	if err := writeMetrics(dir, rows); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "metrics.csv")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s to follow the run: %w", path, err)
	}
	l := &liveMetrics{f: f}
	l.w = csv.NewWriter(&l.buf)
	return l, nil
}

// add appends row to the file.
func (l *liveMetrics) add(row Row) error {
	l.buf.Reset()
	if err := l.w.Write(row.record()); err != nil {
		return err
	}
	l.w.Flush()
	if err := l.w.Error(); err != nil {
		return err
	}
	if _, err := l.f.Write(l.buf.Bytes()); err != nil {
		return fmt.Errorf("appending to %s: %w", l.f.Name(), err)
	}
	return nil
}

func (l *liveMetrics) close() {
	if l != nil {
		l.f.Close()
	}
}

// record keeps a row of metrics.csv, and on rank 0 appends it to the live file and, when
// asked, to the TensorBoard events.
func (r *run) record(row Row) error {
	r.rows = append(r.rows, row)
	if r.live == nil {
		return nil
	}
	if err := r.live.add(row); err != nil {
		return err
	}
	if r.board == nil {
		return nil
	}
	return r.board.Scalars(int64(row.Step), time.Now(), scalars(row))
}

// scalars are the figures of a metrics row that TensorBoard shows.
func scalars(row Row) map[string]float64 {
	m := map[string]float64{}
	put := func(tag string, v *float64) {
		if v != nil {
			m[tag] = *v
		}
	}
	if row.Kind == "eval" {
		put("eval/accuracy", row.EvalAcc)
		put("eval/loss", row.EvalLoss)
		put("eval/perplexity", row.EvalPPL)
		return m
	}
	m["train/loss"], m["train/lr"], m["train/bytes_sent"] = row.Loss, row.LR, float64(row.Bytes)
	if row.StepMS.Total > 0 {
		m["train/samples_per_s"] = float64(row.Samples) / (row.StepMS.Total / 1000)
	}
	put("train/density", row.Density)
	return m
}

// writeProgress writes summary.json as the run stands, marked "complete": false, atomically:
// at each evaluation a running experiment can be read as far as it has got.
func (r *run) writeProgress() error {
	s := r.summarize(nil)
	s.Complete = false
	return writeSummary(r.cfg.Out, s)
}
