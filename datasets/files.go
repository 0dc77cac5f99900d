package datasets

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// source describes a data set for error messages: what --data-dir must hold and where to get it.
type source struct {
	name   string   // human name, e.g. "MNIST"
	files  []string // what the directory must contain, as shown to the user
	url    string   // where the data set can be obtained
	fetch  string   // the name `ssfusion data fetch` knows it by
	subdir []string // sub-directories an unpacked archive or torchvision creates, tried after dir itself
}

func (s source) wants() string {
	return fmt.Sprintf("--data-dir should be a directory containing %s; %s",
		strings.Join(s.files, ", "), s.getIt())
}

// getIt says how to obtain the data set.
func (s source) getIt() string {
	return fmt.Sprintf("`ssfusion data fetch %s` downloads %s into data/%s, or get it from %s",
		s.fetch, s.name, s.fetch, s.url)
}

// dir resolves the directory that actually holds the files: dir itself when it contains
// probe (a base name or candidates for one), else the first of s.subdir that does. Missing
// directories and missing files get an error that says what --data-dir must contain.
func (s source) dir(dir string, probe ...string) (string, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("%s: data directory %s: %w; %s", s.name, dir, err, s.wants())
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s: data directory %s is not a directory; %s", s.name, dir, s.wants())
	}
	for _, d := range append([]string{dir}, joinAll(dir, s.subdir)...) {
		if _, ok := firstExisting(d, probe); ok {
			return d, nil
		}
	}
	where := dir
	for _, d := range joinAll(dir, s.subdir) {
		where += " or " + d
	}
	return "", fmt.Errorf("%s: %s not found in %s: %w; %s", s.name, strings.Join(probe, " or "),
		where, fs.ErrNotExist, s.wants())
}

// file returns the path of the first existing candidate name in dir, or an error naming the
// file that was expected.
func (s source) file(dir string, candidates ...string) (string, error) {
	if p, ok := firstExisting(dir, candidates); ok {
		return p, nil
	}
	return "", fmt.Errorf("%s: %s not found%s: %w; %s", s.name, filepath.Join(dir, candidates[0]),
		alsoTried(candidates), fs.ErrNotExist, s.wants())
}

func alsoTried(candidates []string) string {
	if len(candidates) < 2 {
		return ""
	}
	return " (also tried " + strings.Join(candidates[1:], ", ") + ")"
}

func joinAll(dir string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = filepath.Join(dir, n)
	}
	return out
}

func firstExisting(dir string, names []string) (string, bool) {
	for _, n := range names {
		p := filepath.Join(dir, n)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, true
		}
	}
	return "", false
}

var gzipMagic = []byte{0x1f, 0x8b}

// readMaybeGzip reads the whole file at path, decompressing it when it starts with the gzip
// magic bytes: data sets are shipped both ways and the file name is not a reliable guide.
func readMaybeGzip(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if !bytes.HasPrefix(raw, gzipMagic) {
		return raw, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("reading %s: gzip header: %w", path, err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("reading %s: gzip stream is truncated: %w", path, err)
		}
		return nil, fmt.Errorf("reading %s: decompressing gzip: %w", path, err)
	}
	return out, nil
}
