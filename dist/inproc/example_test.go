package inproc_test

import (
	"fmt"
	"sync"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/inproc"
)

// Three ranks, goroutines of this process, sum their buffers. Every rank issues the same
// collectives in the same order, and every rank ends with the same result.
func ExampleNew() {
	comms := inproc.New(3)
	results := make([][]float32, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() {
			defer c.Close()
			buf := []float32{float32(r), 1}
			if err := c.AllReduce(buf, dist.Sum); err != nil {
				panic(err)
			}
			results[r] = buf
		})
	}
	wg.Wait()
	fmt.Println(results)
	// Output: [[3 3] [3 3] [3 3]]
}
