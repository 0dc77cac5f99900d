package datasets

import (
	"slices"
	"testing"
)

func isPermutation(p []int, n int) bool {
	if len(p) != n {
		return false
	}
	seen := make([]bool, n)
	for _, v := range p {
		if v < 0 || v >= n || seen[v] {
			return false
		}
		seen[v] = true
	}
	return true
}

func TestEpochOrder(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 100, 1000} {
		for _, seed := range []int64{0, 1, -5} {
			for epoch := 0; epoch < 3; epoch++ {
				p := EpochOrder(n, seed, epoch)
				if !isPermutation(p, n) {
					t.Fatalf("EpochOrder(%d, %d, %d) = %v is not a permutation", n, seed, epoch, p)
				}
				if q := EpochOrder(n, seed, epoch); !slices.Equal(p, q) {
					t.Fatalf("EpochOrder(%d, %d, %d) is not deterministic", n, seed, epoch)
				}
			}
		}
	}
	if slices.Equal(EpochOrder(100, 1, 0), EpochOrder(100, 1, 1)) {
		t.Error("epochs 0 and 1 have the same order")
	}
	if slices.Equal(EpochOrder(100, 1, 0), EpochOrder(100, 2, 0)) {
		t.Error("seeds 1 and 2 give the same order")
	}
	identity := EpochOrder(100, 0, 0)
	slices.Sort(identity)
	if slices.Equal(EpochOrder(100, 0, 0), identity) {
		t.Error("the order is not shuffled")
	}
}

// TestEpochOrderStable pins the order so that a change of the shuffle, which would make a
// resumed run see other data than the interrupted one, does not go unnoticed.
func TestEpochOrderStable(t *testing.T) {
	got := EpochOrder(10, 42, 3)
	want := []int{6, 8, 9, 0, 2, 1, 5, 4, 3, 7}
	if !slices.Equal(got, want) {
		t.Errorf("EpochOrder(10, 42, 3) = %v, want %v", got, want)
	}
}

// TestEpochOrderUniform checks that every element lands in every position about equally often.
func TestEpochOrderUniform(t *testing.T) {
	const n, trials = 5, 20000
	var counts [n][n]int
	for e := 0; e < trials; e++ {
		for pos, v := range EpochOrder(n, 7, e) {
			counts[v][pos]++
		}
	}
	for v := range counts {
		for pos, c := range counts[v] {
			if c < trials/n*9/10 || c > trials/n*11/10 {
				t.Errorf("element %d at position %d %d times in %d, want about %d", v, pos, c, trials, trials/n)
			}
		}
	}
}

func TestShard(t *testing.T) {
	tests := []struct{ n, world int }{
		{10, 1}, {10, 2}, {10, 3}, {10, 4}, {3, 4}, {0, 2}, {97, 8}, {64, 8},
	}
	for _, tt := range tests {
		order := EpochOrder(tt.n, 1, 0)
		per := tt.n / tt.world
		seen := map[int]int{}
		for rank := 0; rank < tt.world; rank++ {
			s := Shard(order, rank, tt.world)
			if len(s) != per {
				t.Errorf("n=%d world=%d rank=%d: %d elements, want %d", tt.n, tt.world, rank, len(s), per)
			}
			for i, v := range s {
				if v != order[rank+i*tt.world] {
					t.Errorf("n=%d world=%d rank=%d: element %d is %d, want order[%d] = %d",
						tt.n, tt.world, rank, i, v, rank+i*tt.world, order[rank+i*tt.world])
				}
				seen[v]++
			}
		}
		// Together the shards are exactly the first per*world elements of the order.
		if len(seen) != per*tt.world {
			t.Errorf("n=%d world=%d: shards cover %d distinct elements, want %d", tt.n, tt.world, len(seen), per*tt.world)
		}
		for _, v := range order[:per*tt.world] {
			if seen[v] != 1 {
				t.Errorf("n=%d world=%d: element %d is in %d shards, want 1", tt.n, tt.world, v, seen[v])
			}
		}
	}
}

func TestShardPanicsOnBadRank(t *testing.T) {
	for _, tt := range []struct{ rank, world int }{{0, 0}, {2, 2}, {-1, 2}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Shard(rank %d, world %d) did not panic", tt.rank, tt.world)
				}
			}()
			Shard([]int{1, 2, 3}, tt.rank, tt.world)
		}()
	}
}
