package fusion

import (
	"reflect"
	"testing"
)

func TestPlanBuckets(t *testing.T) {
	sizes := map[int]int{0: 10, 1: 20, 2: 5, 3: 100, 4: 1}
	numel := func(id int) int { return sizes[id] }
	for _, tc := range []struct {
		name      string
		order     []int
		threshold int
		want      [][]int
	}{
		{"all in one", []int{4, 3, 2, 1, 0}, 4 * 1000, [][]int{{4, 3, 2, 1, 0}}},
		{"exact fit stays", []int{0, 1}, 4 * 30, [][]int{{0, 1}}},
		{"overflow starts a new buffer", []int{0, 1, 2}, 4 * 30, [][]int{{0, 1}, {2}}},
		{"large tensor alone", []int{2, 3, 4}, 4 * 50, [][]int{{2}, {3}, {4}}},
		{"one per buffer", []int{0, 1}, 1, [][]int{{0}, {1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buckets, err := PlanBuckets(tc.order, numel, tc.threshold)
			if err != nil {
				t.Fatal(err)
			}
			var got [][]int
			for _, b := range buckets {
				got = append(got, b.Tensors)
				off := 0
				for i, id := range b.Tensors {
					if b.Offsets[i] != off {
						t.Errorf("tensor %d at offset %d, want %d", id, b.Offsets[i], off)
					}
					off += sizes[id]
				}
				if b.Numel != off {
					t.Errorf("bucket numel %d, want %d", b.Numel, off)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("buckets %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := PlanBuckets([]int{0, 0}, numel, 100); err == nil {
		t.Error("a tensor listed twice was accepted")
	}
	if _, err := PlanBuckets([]int{0}, numel, 0); err == nil {
		t.Error("a zero threshold was accepted")
	}
}
