package datasets

import "fmt"

// Streams is a token sequence cut into parallel streams, like PyTorch's batchify, for
// truncated back-propagation through time: stream b is the b-th contiguous piece of the
// sequence, and batch i holds window i of every stream.
type Streams struct {
	n    int     // streams
	len  int     // tokens per stream
	data []int32 // stream-major: data[b*len+t]
}

// Batchify splits tokens into the given number of equal contiguous streams, dropping the
// tokens that do not fill the last position of every stream. It fails when a stream would
// hold fewer than 2 tokens, the least that gives one input and its target.
func Batchify(tokens []int32, streams int) (*Streams, error) {
	if streams <= 0 {
		return nil, fmt.Errorf("datasets: batchify: %d streams, want > 0", streams)
	}
	per := len(tokens) / streams
	if per < 2 {
		return nil, fmt.Errorf("datasets: batchify: %d tokens make %d per stream for %d streams, want at least 2",
			len(tokens), per, streams)
	}
	data := make([]int32, per*streams)
	copy(data, tokens)
	return &Streams{n: streams, len: per, data: data}, nil
}

// ShardTokens returns rank's contiguous 1/world share of tokens, dropping the remainder so that
// every rank gets as many tokens. The result aliases tokens.
// It panics if world < 1 or rank is not in [0, world).
func ShardTokens(tokens []int32, rank, world int) []int32 {
	checkRank("ShardTokens", rank, world)
	per := len(tokens) / world
	return tokens[rank*per : (rank+1)*per : (rank+1)*per]
}

// Streams is the number of parallel streams.
func (s *Streams) Streams() int { return s.n }

// Len is the number of tokens per stream.
func (s *Streams) Len() int { return s.len }

// Batches is the number of full BPTT windows of seqLen inputs; a window needs seqLen+1 tokens
// because its targets are the inputs shifted by one, and the short tail is dropped so that
// every batch has the same shape.
func (s *Streams) Batches(seqLen int) int {
	if seqLen <= 0 {
		return 0
	}
	return (s.len - 1) / seqLen
}

// Batch fills x and y (Streams()*seqLen each, row b is stream b) with window i:
// x[b*seqLen+t] is token i*seqLen+t of stream b and y[b*seqLen+t] the token after it.
// It panics if i is not in [0, Batches(seqLen)) or x or y is too small.
func (s *Streams) Batch(i, seqLen int, x, y []int32) {
	if i < 0 || i >= s.Batches(seqLen) {
		panic(fmt.Sprintf("datasets: Streams.Batch: window %d of length %d out of range [0, %d)", i, seqLen, s.Batches(seqLen)))
	}
	if len(x) < s.n*seqLen || len(y) < s.n*seqLen {
		panic(fmt.Sprintf("datasets: Streams.Batch: buffers of %d and %d tokens, want %d", len(x), len(y), s.n*seqLen))
	}
	for b := 0; b < s.n; b++ {
		src := s.data[b*s.len+i*seqLen:]
		copy(x[b*seqLen:(b+1)*seqLen], src[:seqLen])
		copy(y[b*seqLen:(b+1)*seqLen], src[1:seqLen+1])
	}
}
