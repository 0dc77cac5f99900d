package experiments_test

import (
	"context"
	"fmt"
	"os"

	_ "github.com/ssfusion/ssfusion/baselines" // the pipelines the cells name
	"github.com/ssfusion/ssfusion/experiments"
	"github.com/ssfusion/ssfusion/trainer"
)

// Running an experiment from Go: parse the file, expand its matrix into cells, and let a
// Runner train each cell (here in this process; the run command starts a child process per
// cell). A second run finds every cell done and skips it.
func Example() {
	spec, err := experiments.Parse([]byte(`
name: tiny
base: {model: mlp, dataset: synthetic, max-steps: 3, eval-samples: 32, log-every: 0}
matrix: {pipeline: [dense, pertensor]}
`))
	if err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "experiment")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	cells, err := spec.Expand(dir)
	if err != nil {
		panic(err)
	}
	runner := experiments.Runner{
		Train: func(ctx context.Context, cell experiments.Cell, resume bool) error {
			_, err := trainer.Run(ctx, cell.Config, trainer.Options{})
			return err
		},
		Progress: func(i, n int, cell experiments.Cell, action experiments.Action, _ []string) {
			fmt.Printf("cell %d of %d, %s: %s\n", i+1, n, cell.Name, action)
		},
	}
	for range 2 {
		if _, err := runner.Run(context.Background(), cells); err != nil {
			panic(err)
		}
	}
	// Output:
	// cell 1 of 2, pipeline-dense: start
	// cell 2 of 2, pipeline-pertensor: start
	// cell 1 of 2, pipeline-dense: skip
	// cell 2 of 2, pipeline-pertensor: skip
}
