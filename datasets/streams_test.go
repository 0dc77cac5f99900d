package datasets

import (
	"slices"
	"testing"
)

func seq(n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(i)
	}
	return s
}

func TestBatchify(t *testing.T) {
	// 22 tokens in 4 streams: 5 per stream, the last 2 tokens dropped.
	s, err := Batchify(seq(22), 4)
	if err != nil {
		t.Fatal(err)
	}
	if s.Streams() != 4 || s.Len() != 5 {
		t.Fatalf("%d streams of %d, want 4 of 5", s.Streams(), s.Len())
	}
	tests := []struct {
		seqLen, batches int
		i               int
		x, y            []int32
	}{
		{seqLen: 2, batches: 2, i: 0, x: []int32{0, 1, 5, 6, 10, 11, 15, 16}, y: []int32{1, 2, 6, 7, 11, 12, 16, 17}},
		{seqLen: 2, batches: 2, i: 1, x: []int32{2, 3, 7, 8, 12, 13, 17, 18}, y: []int32{3, 4, 8, 9, 13, 14, 18, 19}},
		{seqLen: 4, batches: 1, i: 0, x: []int32{0, 1, 2, 3, 5, 6, 7, 8, 10, 11, 12, 13, 15, 16, 17, 18},
			y: []int32{1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14, 16, 17, 18, 19}},
		{seqLen: 1, batches: 4, i: 3, x: []int32{3, 8, 13, 18}, y: []int32{4, 9, 14, 19}},
		{seqLen: 5, batches: 0},
		{seqLen: 0, batches: 0},
	}
	for _, tt := range tests {
		if got := s.Batches(tt.seqLen); got != tt.batches {
			t.Errorf("Batches(%d) = %d, want %d", tt.seqLen, got, tt.batches)
		}
		if tt.x == nil {
			continue
		}
		x, y := make([]int32, 4*tt.seqLen), make([]int32, 4*tt.seqLen)
		s.Batch(tt.i, tt.seqLen, x, y)
		if !slices.Equal(x, tt.x) || !slices.Equal(y, tt.y) {
			t.Errorf("Batch(%d, %d) = %v, %v; want %v, %v", tt.i, tt.seqLen, x, y, tt.x, tt.y)
		}
	}
}

// TestBatchTargetsShifted checks on random tokens that targets are the inputs shifted by one,
// within a window and across consecutive windows, and that the windows tile every stream.
func TestBatchTargetsShifted(t *testing.T) {
	tokens := SyntheticText(50, 1003, 1).Train
	const streams, seqLen = 3, 7
	s, err := Batchify(tokens, streams)
	if err != nil {
		t.Fatal(err)
	}
	per := len(tokens) / streams
	x, y := make([]int32, streams*seqLen), make([]int32, streams*seqLen)
	for i := 0; i < s.Batches(seqLen); i++ {
		s.Batch(i, seqLen, x, y)
		for b := 0; b < streams; b++ {
			for tt := 0; tt < seqLen; tt++ {
				pos := b*per + i*seqLen + tt
				if x[b*seqLen+tt] != tokens[pos] || y[b*seqLen+tt] != tokens[pos+1] {
					t.Fatalf("window %d stream %d step %d: x=%d y=%d, want %d %d",
						i, b, tt, x[b*seqLen+tt], y[b*seqLen+tt], tokens[pos], tokens[pos+1])
				}
			}
		}
	}
	if (s.Batches(seqLen)+1)*seqLen+1 <= per {
		t.Errorf("%d windows leave a full window unused in streams of %d", s.Batches(seqLen), per)
	}
}

func TestBatchifyErrors(t *testing.T) {
	tests := []struct {
		n, streams int
	}{
		{7, 4}, {0, 1}, {1, 1}, {10, 0}, {10, -1},
	}
	for _, tt := range tests {
		if s, err := Batchify(seq(tt.n), tt.streams); err == nil {
			t.Errorf("Batchify(%d tokens, %d streams) = %d streams of %d, want an error", tt.n, tt.streams, s.Streams(), s.Len())
		}
	}
	if _, err := Batchify(seq(8), 4); err != nil {
		t.Errorf("Batchify(8 tokens, 4 streams): %v", err)
	}
}

func TestShardTokens(t *testing.T) {
	tests := []struct{ n, world int }{{10, 1}, {10, 3}, {12, 4}, {2, 3}}
	for _, tt := range tests {
		tokens := seq(tt.n)
		per := tt.n / tt.world
		var all []int32
		for rank := 0; rank < tt.world; rank++ {
			s := ShardTokens(tokens, rank, tt.world)
			if !slices.Equal(s, tokens[rank*per:(rank+1)*per]) {
				t.Errorf("n=%d world=%d rank=%d: %v, want the contiguous %v", tt.n, tt.world, rank, s, tokens[rank*per:(rank+1)*per])
			}
			all = append(all, s...)
		}
		// Disjoint and together the first per*world tokens, in order.
		if !slices.Equal(all, tokens[:per*tt.world]) {
			t.Errorf("n=%d world=%d: shards concatenate to %v, want %v", tt.n, tt.world, all, tokens[:per*tt.world])
		}
	}
	// Appending to a shard must not overwrite the next rank's tokens.
	tokens := seq(6)
	_ = append(ShardTokens(tokens, 0, 2), 99)
	if tokens[3] != 3 {
		t.Error("appending to shard 0 overwrote shard 1")
	}
}
