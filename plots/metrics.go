package plots

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
)

// Metric is one row of metrics.csv: a training step (Kind "train") or an evaluation on the
// test split (Kind "eval"). A value the row does not carry, because its cell is empty (the
// eval columns of a train row) or because the file has no such column, is NaN.
type Metric struct {
	Kind           string
	Step           int
	Epoch          float64
	WallS          float64 // seconds since the run started
	Loss           float64 // training loss of the step
	EvalAccuracy   float64 // fraction of the test split classified right, in [0, 1]
	EvalLoss       float64
	EvalPerplexity float64 // language models only
	Density        float64 // elements sent over elements in all tensors, sparsifying pipelines only
	// Imbalance is the largest partition's selected count over the mean (ExDyna only).
	Imbalance float64
}

// Kinds of metrics.csv rows.
const (
	kindTrain = "train"
	kindEval  = "eval"
)

// metricColumns holds where each column the plots read sits in a metrics.csv record, or -1
// when the file lacks it. Columns are found by header name so that the trainer may add or
// reorder columns without breaking the plots.
type metricColumns struct {
	kind, step, epoch, wallS, loss, evalAccuracy, evalLoss, evalPerplexity, density, imbalance int
}

// ReadMetrics reads the metrics.csv at path. The columns kind and step are required, every
// other column is optional; a record with the wrong number of fields or a value that is not
// a number is an error naming the file and line. A last line without its newline is left
// out: a running training may be writing it.
func ReadMetrics(path string) ([]Metric, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		data = data[:i+1]
	}
	metrics, err := parseMetrics(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return metrics, nil
}

func parseMetrics(r io.Reader) ([]Metric, error) {
	cr := csv.NewReader(r)
	// The header fixes the field count; csv.Reader then rejects, with the line number, any
	// record that differs.
	cr.FieldsPerRecord = 0
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("empty file, want a header line")
	}
	if err != nil {
		return nil, err
	}
	cols, err := locateColumns(header)
	if err != nil {
		return nil, err
	}
	var metrics []Metric
	for {
		record, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return metrics, nil
		}
		if err != nil {
			return nil, err
		}
		m, err := cols.parse(record, header)
		if err != nil {
			var bad *badValueError
			if errors.As(err, &bad) {
				line, _ := cr.FieldPos(bad.col)
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
			return nil, err
		}
		metrics = append(metrics, m)
	}
}

func locateColumns(header []string) (metricColumns, error) {
	find := func(name string) int {
		for i, h := range header {
			if h == name {
				return i
			}
		}
		return -1
	}
	cols := metricColumns{
		kind: find("kind"), step: find("step"), epoch: find("epoch"), wallS: find("wall_s"),
		loss: find("loss"), evalAccuracy: find("eval_accuracy"), evalLoss: find("eval_loss"),
		evalPerplexity: find("eval_perplexity"), density: find("density_achieved"),
		imbalance: find("partition_imbalance"),
	}
	if cols.kind < 0 || cols.step < 0 {
		return metricColumns{}, fmt.Errorf("line 1: header %q lacks the column kind or step", header)
	}
	return cols, nil
}

// badValueError is a field that does not parse; col lets the caller find its line.
type badValueError struct {
	col    int
	column string
	value  string
	want   string
}

func (e *badValueError) Error() string {
	return fmt.Sprintf("column %s: %q is not %s", e.column, e.value, e.want)
}

func (cols metricColumns) parse(record, header []string) (Metric, error) {
	m := Metric{Kind: record[cols.kind]}
	step, err := strconv.Atoi(record[cols.step])
	if err != nil {
		return Metric{}, &badValueError{cols.step, header[cols.step], record[cols.step], "an integer"}
	}
	m.Step = step
	fields := []struct {
		col int
		dst *float64
	}{
		{cols.epoch, &m.Epoch}, {cols.wallS, &m.WallS}, {cols.loss, &m.Loss},
		{cols.evalAccuracy, &m.EvalAccuracy}, {cols.evalLoss, &m.EvalLoss},
		{cols.evalPerplexity, &m.EvalPerplexity}, {cols.density, &m.Density},
		{cols.imbalance, &m.Imbalance},
	}
	for _, f := range fields {
		*f.dst = math.NaN()
		if f.col < 0 || record[f.col] == "" {
			continue
		}
		// ParseFloat also takes "NaN" and "Inf", which a diverged run writes; the plots
		// leave such points out rather than refuse the file.
		v, err := strconv.ParseFloat(record[f.col], 64)
		if err != nil {
			return Metric{}, &badValueError{f.col, header[f.col], record[f.col], "a number"}
		}
		*f.dst = v
	}
	return m, nil
}
