package compress_test

import (
	"fmt"

	"github.com/ssfusion/ssfusion/compress"
)

// Top-k sparsification with error feedback, as the sparsifying pipelines run it for one
// tensor: add the gradient to what earlier steps did not send, select the k largest in
// magnitude, send them, and keep the rest for the next step.
func Example() {
	cfg := compress.Config{Density: 0.25, Selector: "topk"}
	mem, err := compress.NewMemory([]int{8}, cfg)
	if err != nil {
		panic(err)
	}
	sel, err := compress.NewSelector(cfg.Selector, 0)
	if err != nil {
		panic(err)
	}
	grad := []float32{0.1, -3, 0.2, 0.05, 2, -0.1, 0.3, 0.01}
	for step := range 2 {
		acc, err := mem.Accumulate(0, grad)
		if err != nil {
			panic(err)
		}
		k := compress.KFor(len(acc), cfg.Density)
		idx, err := sel.Select(acc, k, nil)
		if err != nil {
			panic(err)
		}
		values := make([]float32, len(idx))
		for i, j := range idx {
			values[i] = acc[j]
		}
		if err := mem.Sent(0, idx); err != nil {
			panic(err)
		}
		fmt.Printf("step %d sends %v at %v, keeps %v\n", step, values, idx, mem.Residual(0))
	}
	// Output:
	// step 0 sends [-3 2] at [1 4], keeps [0.1 0 0.2 0.05 0 -0.1 0.3 0.01]
	// step 1 sends [-3 2] at [1 4], keeps [0.2 0 0.4 0.1 0 -0.2 0.6 0.02]
}
