package datasets

import (
	"bytes"
	"math"
	"slices"
	"testing"
)

func TestSyntheticImagesDeterministic(t *testing.T) {
	a := SyntheticImages(50, 3, 8, 8, 10, 1)
	b := SyntheticImages(50, 3, 8, 8, 10, 1)
	c := SyntheticImages(50, 3, 8, 8, 10, 2)
	if !bytes.Equal(a.Pixels, b.Pixels) || !slices.Equal(a.Labels, b.Labels) {
		t.Error("same seed, different sets")
	}
	if bytes.Equal(a.Pixels, c.Pixels) {
		t.Error("different seeds, same pixels")
	}
	if a.Len() != 50 || len(a.Pixels) != 50*3*8*8 || a.C != 3 || a.H != 8 || a.W != 8 || a.Classes != 10 || a.Name != "synthetic" {
		t.Errorf("got %s: %d images, %d pixels, %dx%dx%d, %d classes", a.Name, a.Len(), len(a.Pixels), a.C, a.H, a.W, a.Classes)
	}
	for i, l := range a.Labels {
		if l < 0 || l >= 10 {
			t.Fatalf("label %d = %d", i, l)
		}
	}
}

// TestSyntheticImagesLearnable fits a nearest-class-mean classifier on a synthetic training
// split and checks on its test split that it is far above chance (the task is learnable,
// and the test split has the training split's classes) but not perfect (the nuisances
// leave something for a real model to learn).
func TestSyntheticImagesLearnable(t *testing.T) {
	const classes = 10
	train, test := SyntheticImageSplits(1000, 500, 3, 16, 16, classes, 5)
	if same := SyntheticImages(1000, 3, 16, 16, classes, 5); !slices.Equal(same.Pixels, train.Pixels) || !slices.Equal(same.Labels, train.Labels) {
		t.Fatal("the training split is not SyntheticImages of the same arguments")
	}
	if slices.Equal(train.Pixels[:len(test.Pixels)], test.Pixels) {
		t.Fatal("the test split repeats the training split")
	}
	chw := 3 * 16 * 16
	means := make([][]float64, classes)
	counts := make([]int, classes)
	for k := range means {
		means[k] = make([]float64, chw)
	}
	for i := range train.Len() {
		k := train.Labels[i]
		counts[k]++
		for j, p := range train.Pixels[i*chw : (i+1)*chw] {
			means[k][j] += float64(p)
		}
	}
	for k := range means {
		for j := range means[k] {
			means[k][j] /= float64(max(counts[k], 1))
		}
	}
	correct := 0
	for i := range test.Len() {
		best, bestD := -1, math.Inf(1)
		for k := range means {
			d := 0.0
			for j, p := range test.Pixels[i*chw : (i+1)*chw] {
				d += (float64(p) - means[k][j]) * (float64(p) - means[k][j])
			}
			if d < bestD {
				best, bestD = k, d
			}
		}
		if int32(best) == test.Labels[i] {
			correct++
		}
	}
	if acc := float64(correct) / float64(test.Len()); acc < 0.6 || acc > 0.97 {
		t.Errorf("nearest-mean accuracy %.3f, want in [0.6, 0.97] (chance 0.1)", acc)
	}
	all := train
	// Not trivially constant: the pixels vary within a class.
	_, std := all.ChannelStats()
	for c, s := range std {
		if s < 0.05 {
			t.Errorf("channel %d std %.3f: too little variation", c, s)
		}
	}
}

func TestSyntheticText(t *testing.T) {
	a := SyntheticText(200, 20000, 3)
	b := SyntheticText(200, 20000, 3)
	c := SyntheticText(200, 20000, 4)
	if !slices.Equal(a.Train, b.Train) || !slices.Equal(a.Valid, b.Valid) || !slices.Equal(a.Test, b.Test) || !slices.Equal(a.Vocab, b.Vocab) {
		t.Error("same seed, different corpora")
	}
	if slices.Equal(a.Train, c.Train) {
		t.Error("different seeds, same text")
	}
	if a.VocabSize() != 200 || len(a.Train) != 20000 || len(a.Valid) != 2000 || len(a.Test) != 2000 {
		t.Errorf("vocab %d, %d/%d/%d tokens; want 200, 20000/2000/2000", a.VocabSize(), len(a.Train), len(a.Valid), len(a.Test))
	}
	if a.Vocab[0] != UNK || a.Vocab[1] != EOS {
		t.Errorf("vocab starts %q, want %q %q", a.Vocab[:2], UNK, EOS)
	}
	seen := map[int32]bool{}
	for _, id := range slices.Concat(a.Train, a.Valid, a.Test) {
		if id < 0 || int(id) >= a.VocabSize() {
			t.Fatalf("token id %d outside the vocabulary", id)
		}
		seen[id] = true
	}
	if !seen[1] {
		t.Error("no line ends")
	}
	if len(seen) < 150 {
		t.Errorf("only %d of 200 words used", len(seen))
	}
	if small := SyntheticText(2, 0, 1); len(small.Train) != 0 || len(small.Valid) != 100 {
		t.Errorf("SyntheticText(2, 0): %d train, %d valid tokens; want 0, 100", len(small.Train), len(small.Valid))
	}
}

// TestSyntheticTextLearnable checks that a bigram model fitted on the training text predicts
// the validation text far better than the uniform model.
func TestSyntheticTextLearnable(t *testing.T) {
	const v = 500
	c := SyntheticText(v, 200000, 9)
	counts := make([]map[int32]float64, v)
	totals := make([]float64, v)
	for i := 1; i < len(c.Train); i++ {
		p := c.Train[i-1]
		if counts[p] == nil {
			counts[p] = map[int32]float64{}
		}
		counts[p][c.Train[i]]++
		totals[p]++
	}
	const alpha = 0.01 // add-alpha smoothing
	bits := 0.0
	for i := 1; i < len(c.Valid); i++ {
		p, n := c.Valid[i-1], c.Valid[i]
		prob := (counts[p][n] + alpha) / (totals[p] + alpha*v)
		bits -= math.Log2(prob)
	}
	bits /= float64(len(c.Valid) - 1)
	t.Logf("bigram cross-entropy %.2f bits per token (uniform %.2f)", bits, math.Log2(v))
	if bits > 2.5 {
		t.Errorf("bigram cross-entropy %.2f bits per token, want <= 2.5 (uniform: %.2f)", bits, math.Log2(v))
	}
}
