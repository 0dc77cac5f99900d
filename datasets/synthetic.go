package datasets

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Stream numbers that keep the random draws of a synthetic set's parts independent.
const (
	streamPrototypes = iota + 1
	streamSamples
	streamChain
	streamText
	streamTestSamples
)

// SyntheticImages makes a labelled set that a small model can learn but not trivially: every
// class has a smooth prototype per channel (a base level plus two low-frequency waves, which
// survive cropping and flipping), and every image is its class's prototype, circularly shifted
// by up to a quarter of its size, with a random contrast, up to 45% of another class's
// prototype mixed in, and Gaussian pixel noise (a nearest-class-mean classifier gets about 85%
// of 10 classes of 3x32x32 right). The set is a function of its arguments and seed only.
// It panics if n is negative or c, h, w or classes is not positive.
func SyntheticImages(n, c, h, w, classes int, seed int64) *ImageSet {
	checkSynthetic(n, c, h, w, classes)
	return syntheticSamples(n, c, h, w, classes, syntheticPrototypes(c, h, w, classes, seed), rand.New(rand.NewPCG(uint64(seed), streamSamples)))
}

// SyntheticImageSplits makes a training and a test split of one synthetic task: the
// training split is SyntheticImages(trainN, ...), and the test split draws testN further
// images of the same class prototypes, so that a model that learns the training split is
// judged on the same classes. It panics as SyntheticImages does.
func SyntheticImageSplits(trainN, testN, c, h, w, classes int, seed int64) (train, test *ImageSet) {
	checkSynthetic(trainN, c, h, w, classes)
	checkSynthetic(testN, c, h, w, classes)
	protos := syntheticPrototypes(c, h, w, classes, seed)
	train = syntheticSamples(trainN, c, h, w, classes, protos, rand.New(rand.NewPCG(uint64(seed), streamSamples)))
	test = syntheticSamples(testN, c, h, w, classes, protos, rand.New(rand.NewPCG(uint64(seed), streamTestSamples)))
	return train, test
}

func checkSynthetic(n, c, h, w, classes int) {
	if n < 0 || c <= 0 || h <= 0 || w <= 0 || classes <= 0 {
		panic(fmt.Sprintf("datasets: SyntheticImages(n=%d, c=%d, h=%d, w=%d, classes=%d): want n >= 0 and positive sizes",
			n, c, h, w, classes))
	}
}

// syntheticPrototypes draws every class's smooth prototype, by class, channel, row and
// column.
func syntheticPrototypes(c, h, w, classes int, seed int64) []float64 {
	pr := rand.New(rand.NewPCG(uint64(seed), streamPrototypes))
	chw := c * h * w
	protos := make([]float64, classes*chw)
	for k := 0; k < classes; k++ {
		for ch := 0; ch < c; ch++ {
			base := 64 + 128*pr.Float64()
			type wave struct{ amp, fy, fx, phase float64 }
			var waves [2]wave
			for i := range waves {
				waves[i] = wave{
					amp:   25 + 35*pr.Float64(),
					fy:    float64(pr.IntN(3)),
					fx:    float64(pr.IntN(3)),
					phase: 2 * math.Pi * pr.Float64(),
				}
			}
			p := protos[k*chw+ch*h*w:]
			for y := 0; y < h; y++ {
				for x := 0; x < w; x++ {
					v := base
					for _, wv := range waves {
						v += wv.amp * math.Sin(2*math.Pi*(wv.fy*float64(y)/float64(h)+wv.fx*float64(x)/float64(w))+wv.phase)
					}
					p[y*w+x] = v
				}
			}
		}
	}
	return protos
}

// syntheticSamples draws n images of the prototypes with the nuisances, from sr.
func syntheticSamples(n, c, h, w, classes int, protos []float64, sr *rand.Rand) *ImageSet {
	chw := c * h * w
	set := &ImageSet{Name: "synthetic", C: c, H: h, W: w, Classes: classes,
		Pixels: make([]uint8, n*chw), Labels: make([]int32, n)}
	for i := 0; i < n; i++ {
		k := sr.IntN(classes)
		set.Labels[i] = int32(k)
		// Nuisances a model has to see through: a shift (circular, up to a quarter of the
		// image), a contrast change, some of another class's pattern mixed in, and noise.
		sy, sx := sr.IntN(h/2+1)-h/4, sr.IntN(w/2+1)-w/4
		contrast := 0.6 + 0.8*sr.Float64()
		other, mix := sr.IntN(classes), 0.45*sr.Float64()
		proto := protos[k*chw : (k+1)*chw]
		distractor := protos[other*chw : (other+1)*chw]
		img := set.Pixels[i*chw : (i+1)*chw]
		for ch := 0; ch < c; ch++ {
			for y := 0; y < h; y++ {
				py := ((y+sy)%h + h) % h
				for x := 0; x < w; x++ {
					j := ch*h*w + py*w + ((x+sx)%w+w)%w
					v := (1-mix)*proto[j] + mix*distractor[j]
					v = 128 + contrast*(v-128) + 48*sr.NormFloat64()
					img[ch*h*w+y*w+x] = uint8(math.Round(min(max(v, 0), 255)))
				}
			}
		}
	}
	return set
}

// SyntheticText makes a corpus that a small language model can learn: text from a sparse
// random Markov chain in which every token has four possible successors with probabilities
// 0.6, 0.25, 0.1 and 0.05, plus a 2% chance of jumping to any token so that the whole
// vocabulary is visited (under 2 bits per token for a 10000-word vocabulary, against
// 13.3 for uniform guessing). The vocabulary has vocab entries: UNK, EOS and the words "w0", "w1", ...;
// EOS is a state of the chain, so lines have random lengths. Valid and Test hold
// max(trainTokens/10, 100) tokens each. The corpus is a function of its arguments and seed only.
// It panics if vocab < 2 or trainTokens < 0.
func SyntheticText(vocab, trainTokens int, seed int64) *Corpus {
	if vocab < 2 || trainTokens < 0 {
		panic(fmt.Sprintf("datasets: SyntheticText(vocab=%d, trainTokens=%d): want vocab >= 2 and trainTokens >= 0",
			vocab, trainTokens))
	}
	words := make([]string, vocab)
	words[0], words[1] = UNK, EOS
	for i := 2; i < vocab; i++ {
		words[i] = fmt.Sprintf("w%d", i-2)
	}
	// UNK is kept out of the chain: it stands for words outside the vocabulary, and there are none.
	states := vocab - 1
	const fanOut = 4
	probs := [fanOut]float64{0.6, 0.25, 0.1, 0.05}
	cr := rand.New(rand.NewPCG(uint64(seed), streamChain))
	succ := make([][fanOut]int32, vocab)
	for s := range succ {
		for j := range succ[s] {
			succ[s][j] = int32(1 + cr.IntN(states))
		}
	}
	tr := rand.New(rand.NewPCG(uint64(seed), streamText))
	cur := int32(1) // text starts as if after the end of a line
	gen := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			if tr.Float64() < 0.02 {
				cur = int32(1 + tr.IntN(states))
			} else {
				u, j := tr.Float64(), 0
				for j < fanOut-1 && u >= probs[j] {
					u -= probs[j]
					j++
				}
				cur = succ[cur][j]
			}
			out[i] = cur
		}
		return out
	}
	held := max(trainTokens/10, 100)
	return &Corpus{Name: "synthetic", Vocab: words, Train: gen(trainTokens), Valid: gen(held), Test: gen(held)}
}
