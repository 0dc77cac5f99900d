package trainer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/datasets"
	"github.com/ssfusion/ssfusion/datasets/datasetstest"
)

// TestCheckDataIn: a data set whose files are in the folder loads; one whose files are not
// is refused naming what is missing; a text corpus is read as the LSTM reads it.
func TestCheckDataIn(t *testing.T) {
	mnist, err := datasets.EmbeddedMNISTDir()
	if err != nil {
		t.Skipf("the MNIST files of the Go module are not in the module cache: %v", err)
	}
	cifar := filepath.Join(t.TempDir(), "cifar10")
	if err := datasetstest.CIFAR10Python(cifar, 40); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir string
		want      string // in the error; "" for none
	}{
		{"mnist", mnist, ""},
		{"cifar10", cifar, ""},
		{"cifar10", t.TempDir(), "data_batch_1.bin"},
		{"ptb", t.TempDir(), "ptb"},
		{"wikitext2", t.TempDir(), "wikitext"},
	} {
		err := CheckDataIn(tc.name, tc.dir)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s in %s: %v", tc.name, tc.dir, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "--model")):
			t.Errorf("%s in an empty folder: error %v, want one naming %q, not the model", tc.name, err, tc.want)
		}
	}
}

// TestCheckJob: a launcher refuses, before starting any process, a job whose results
// could not be written or whose ranks would not each get a full batch.
func TestCheckJob(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(c *Config)
		nodes  int
		want   string
	}{
		{"too many workers", func(c *Config) { c.Workers = 1000 }, 1, "make no batch"},
		// 5000 synthetic images make 2 batches of 1000 for each of 2 ranks, none for 8.
		{"too many nodes", func(c *Config) { c.BatchSize = 1000 }, 4, "make no batch"},
		{"unwritable output", func(c *Config) { c.Out = filepath.Join(file, "out") }, 1, "output folder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Defaults()
			cfg.Model, cfg.Dataset, cfg.Workers, cfg.Out = "mlp", "synthetic", 2, t.TempDir()
			tc.change(&cfg)
			if err := CheckJob(cfg, cfg.Workers*tc.nodes); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	cfg := Defaults()
	cfg.Model, cfg.Dataset, cfg.Workers, cfg.Out, cfg.BatchSize = "mlp", "synthetic", 2, t.TempDir(), 1000
	if err := CheckJob(cfg, 2); err != nil {
		t.Fatalf("a job that can run: %v", err)
	}
}
