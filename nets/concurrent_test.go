package nets

import (
	"sync"
	"testing"
)

// TestModelsRunConcurrently builds and trains separate models on separate goroutines, as the
// in-process communicator's workers do, and checks they give the results of a lone model.
func TestModelsRunConcurrently(t *testing.T) {
	specs := []Spec{tinyResNet, tinyLSTM, tinyResNet, tinyLSTM}
	want := make([]Result, len(specs))
	for i, s := range specs {
		want[i] = mustTrain(t, mustNew(t, s), randBatch(s, s.BatchSize, 1))
	}
	got := make([]Result, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, s := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := New(s)
			if err != nil {
				errs[i] = err
				return
			}
			defer m.Close()
			b := randBatch(s, s.BatchSize, 1)
			for k := 0; k < 3; k++ {
				if r, err := m.TrainStep(b); err != nil {
					errs[i] = err
					return
				} else if k == 0 {
					got[i] = r
				}
				if _, err := m.Evaluate(b); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for i := range specs {
		if errs[i] != nil {
			t.Fatalf("model %d: %v", i, errs[i])
		}
		if got[i] != want[i] {
			t.Errorf("model %d: %+v concurrently, %+v alone", i, got[i], want[i])
		}
	}
}
