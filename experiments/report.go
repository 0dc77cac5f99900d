package experiments

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ssfusion/ssfusion/trainer"
)

// WriteReport writes the experiment's report.md beside its cells: one table with a row per
// cell and its figures side by side.
func WriteReport(spec *Spec, cells []Cell, path string) error {
	md, err := Report(spec, cells)
	if err != nil {
		return err
	}
	return trainer.WriteFileAtomic(path, []byte(md))
}

// Report renders the report of an experiment from its cells' summary.json files. A cell
// that has not run yet, or stopped early, is marked so.
func Report(spec *Spec, cells []Cell) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", spec.Name)
	if spec.Description != "" {
		fmt.Fprintf(&b, "%s\n\n", spec.Description)
	}
	b.WriteString("| cell | test accuracy / perplexity | final loss | samples/s | step ms: total, compute, sparsify, comm, wait | bytes sent per step | density achieved | tensors missing per step | ranks agree |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range cells {
		s, err := readSummary(c.Config.Out)
		if err != nil {
			return "", fmt.Errorf("cell %s: %w", c.Name, err)
		}
		if s == nil {
			fmt.Fprintf(&b, "| %s | not run | | | | | | | |\n", c.Name)
			continue
		}
		name := c.Name
		if !s.Complete {
			name += fmt.Sprintf(" (stopped at step %d)", s.Steps)
		}
		t := s.Throughput.StepMS
		fmt.Fprintf(&b, "| %s | %s | %s | %.1f | %.1f, %.1f, %.1f, %.1f, %.1f | %s | %s | %s | %s |\n",
			name, quality(s.Eval), opt(s.FinalLoss, "%.4f"), s.Throughput.SamplesPerS,
			t.Total, t.Compute, t.Sparsify, t.Comm, t.Wait,
			bytesText(s.Traffic.BytesSentPerStep), opt(s.Sparsity.DensityAchieved, "%.4f"),
			opt(s.Sparsity.TensorsMissingPerStep, "%.1f"), agree(s.Consistency.ParamChecksumEqual))
	}
	return b.String(), nil
}

// errCorruptSummary marks a summary.json that is not a summary.
var errCorruptSummary = errors.New("not a summary")

// readSummary reads dir/summary.json; nil without error when there is none.
func readSummary(dir string) (*trainer.Summary, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s trainer.Summary
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("reading %s: %w: %w", filepath.Join(dir, "summary.json"), errCorruptSummary, err)
	}
	return &s, nil
}

func quality(e trainer.Eval) string {
	switch {
	case e.Perplexity != nil:
		return fmt.Sprintf("ppl %.2f", *e.Perplexity)
	case e.Accuracy != nil:
		return fmt.Sprintf("%.2f%%", 100**e.Accuracy)
	}
	return "-"
}

func opt(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

func bytesText(v *float64) string {
	switch {
	case v == nil:
		return "-"
	case *v >= 1e6:
		return fmt.Sprintf("%.2f MB", *v/1e6)
	case *v >= 1e3:
		return fmt.Sprintf("%.1f KB", *v/1e3)
	}
	return fmt.Sprintf("%.0f B", *v)
}

func agree(v *bool) string {
	switch {
	case v == nil:
		return "-"
	case *v:
		return "yes"
	}
	return "**no**"
}
