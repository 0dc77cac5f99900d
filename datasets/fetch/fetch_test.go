package fetch

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// server serves fabricated files by name and records the requests it got.
type server struct {
	t     *testing.T
	files map[string][]byte
	// cutAfter, when positive, ends the first answer for a file after that many bytes by
	// dropping the connection.
	cutAfter int
	noRange  bool // answer every request with the whole file, as servers without ranges do

	mu     sync.Mutex
	ranges []string // the Range header of every request, "" for none
	served int      // body bytes sent
	cut    map[string]bool
}

func newServer(t *testing.T, files map[string][]byte) (*server, *httptest.Server) {
	s := &server{t: t, files: files, cut: map[string]bool{}}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/")
	data, ok := s.files[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	s.ranges = append(s.ranges, r.Header.Get("Range"))
	cut := s.cutAfter > 0 && !s.cut[name]
	s.cut[name] = true
	s.mu.Unlock()
	if s.noRange {
		r.Header.Del("Range")
	}
	if cut {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(http.StatusOK)
		s.count(s.cutAfter) // before the bytes leave, so that the client never sees them uncounted
		w.Write(data[:s.cutAfter])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // drops the connection mid-body
	}
	cw := &countingWriter{ResponseWriter: w, s: s}
	http.ServeContent(cw, r, name, time.Time{}, bytes.NewReader(data))
}

func (s *server) count(n int) {
	s.mu.Lock()
	s.served += n
	s.mu.Unlock()
}

func (s *server) bytesServed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served
}

func (s *server) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ranges...)
}

type countingWriter struct {
	http.ResponseWriter
	s *server
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.s.count(len(p)) // before the bytes leave, so that the client never sees them uncounted
	return w.ResponseWriter.Write(p)
}

func sum(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// payload is deterministic bytes that no two offsets repeat soon, so that a resumed download
// stitched at the wrong place is caught by the checksum.
func payload(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed) + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
	return b
}

func file(name string, data []byte, urls ...string) File {
	return File{Name: name, Size: int64(len(data)), SHA256: sum(data), URLs: urls}
}

func tarGz(t *testing.T, entries map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range entries {
		if strings.HasSuffix(name, "/") {
			tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755})
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return buf.Bytes()
}

func zipped(t *testing.T, entries map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range entries {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFetchDownloadsUnpacksAndVerifies(t *testing.T) {
	plain := payload(5000, 1)
	tgz := tarGz(t, map[string]string{"set-bin/": "", "set-bin/a.bin": "alpha", "set-bin/b.bin": "beta"})
	zp := zipped(t, map[string]string{"text/train.tokens": "a b c\n"})
	_, ts := newServer(t, map[string][]byte{"plain.gz": plain, "set.tar.gz": tgz, "text.zip": zp})
	d := Dataset{Name: "toy", Files: []File{
		file("plain.gz", plain, ts.URL+"/plain.gz"),
		{Name: "set.tar.gz", Size: int64(len(tgz)), SHA256: sum(tgz), URLs: []string{ts.URL + "/set.tar.gz"}, Unpack: true},
		{Name: "text.zip", Size: int64(len(zp)), SHA256: sum(zp), URLs: []string{ts.URL + "/text.zip"}, Unpack: true},
	}}
	dir := filepath.Join(t.TempDir(), "toy")
	if err := (&Client{}).Fetch(context.Background(), d, dir); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "plain.gz")); !bytes.Equal(got, plain) {
		t.Errorf("plain.gz holds %d bytes, not the %d served", len(got), len(plain))
	}
	if got := string(readFile(t, filepath.Join(dir, "set-bin", "b.bin"))); got != "beta" {
		t.Errorf("set-bin/b.bin = %q, want beta", got)
	}
	if got := string(readFile(t, filepath.Join(dir, "text", "train.tokens"))); got != "a b c\n" {
		t.Errorf("text/train.tokens = %q", got)
	}
	if problems := Verify(d, dir); problems != nil {
		t.Errorf("Verify after Fetch: %v", problems)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, "*.part"))
	tmps, _ := filepath.Glob(filepath.Join(dir, ".unpack-*"))
	if len(leftovers)+len(tmps) > 0 {
		t.Errorf("left behind: %v %v", leftovers, tmps)
	}

	// Removing an unpacked folder is noticed by Verify and repaired by the next Fetch.
	os.RemoveAll(filepath.Join(dir, "set-bin"))
	if problems := Verify(d, dir); len(problems) != 1 || !strings.Contains(problems[0].Error(), "set-bin") {
		t.Errorf("Verify with set-bin removed: %v, want one problem naming set-bin", problems)
	}
	if err := (&Client{}).Fetch(context.Background(), d, dir); err != nil {
		t.Fatal(err)
	}
	if problems := Verify(d, dir); problems != nil {
		t.Errorf("Verify after the repairing Fetch: %v", problems)
	}
}

func TestFetchSkipsWhatIsAlreadyThere(t *testing.T) {
	data := payload(3000, 2)
	s, ts := newServer(t, map[string][]byte{"f.bin": data})
	d := Dataset{Name: "toy", Files: []File{file("f.bin", data, ts.URL+"/f.bin")}}
	dir := t.TempDir()
	for range 2 {
		if err := (&Client{}).Fetch(context.Background(), d, dir); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.requests()); n != 1 {
		t.Errorf("two fetches made %d requests, want 1", n)
	}
}

func TestFetchResumesAfterACutConnection(t *testing.T) {
	data := payload(200_000, 3)
	for _, tc := range []struct {
		name    string
		noRange bool
		want    []string // Range headers
		served  int
		resumed int64 // where the second attempt's progress bar starts
	}{
		{"server resumes", false, []string{"", "bytes=70000-"}, 200_000, 70_000},
		{"server without ranges", true, []string{"", "bytes=70000-"}, 270_000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ts := newServer(t, map[string][]byte{"f.bin": data})
			s.cutAfter, s.noRange = 70_000, tc.noRange
			d := Dataset{Name: "toy", Files: []File{file("f.bin", data, ts.URL+"/f.bin")}}
			dir := t.TempDir()
			var bars []int64
			c := &Client{NewBar: func(_ string, size, done int64) io.WriteCloser {
				bars = append(bars, done)
				return nopBar{}
			}}
			if err := c.Fetch(context.Background(), d, dir); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, filepath.Join(dir, "f.bin")); !bytes.Equal(got, data) {
				t.Fatal("the resumed file differs from the one served")
			}
			if got := s.requests(); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("Range headers %q, want %q", got, tc.want)
			}
			if got := s.bytesServed(); got != tc.served {
				t.Errorf("served %d bytes, want %d", got, tc.served)
			}
			if len(bars) != 2 || bars[1] != tc.resumed {
				t.Errorf("progress bars started at %v, want [0 %d]", bars, tc.resumed)
			}
		})
	}
}

func TestFetchResumesAnInterruptedRun(t *testing.T) {
	data := payload(50_000, 4)
	s, ts := newServer(t, map[string][]byte{"f.bin": data})
	d := Dataset{Name: "toy", Files: []File{file("f.bin", data, ts.URL+"/f.bin")}}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f.bin.part"), data[:12345], 0o644)
	if err := (&Client{}).Fetch(context.Background(), d, dir); err != nil {
		t.Fatal(err)
	}
	if got := s.requests(); len(got) != 1 || got[0] != "bytes=12345-" {
		t.Errorf("requests %q, want one for bytes=12345-", got)
	}
	if got := s.bytesServed(); got != 50_000-12345 {
		t.Errorf("served %d bytes, want only the missing %d", got, 50_000-12345)
	}
}

func TestFetchRefusesACorruptFile(t *testing.T) {
	good := payload(4000, 5)
	bad := append([]byte(nil), good...)
	bad[1234] ^= 0xff
	for _, tc := range []struct {
		name   string
		served []byte
		want   []string
	}{
		{"flipped byte", bad, []string{sum(bad), sum(good), "f.bin"}},
		{"too long", append(append([]byte(nil), good...), 'x'), []string{"4001 bytes, expected 4000"}},
		{"too short", good[:3000], []string{"closed after 3000 of 4000 bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ts := newServer(t, map[string][]byte{"f.bin": tc.served})
			d := Dataset{Name: "toy", Files: []File{file("f.bin", good, ts.URL+"/f.bin")}}
			dir := t.TempDir()
			err := (&Client{Attempts: 1}).Fetch(context.Background(), d, dir)
			if err == nil {
				t.Fatal("a wrong file was accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "f.bin")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("f.bin exists after a refused download: %v", err)
			}
			if tc.name != "too short" {
				if _, err := os.Stat(filepath.Join(dir, "f.bin.part")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the refused download's .part is kept: %v", err)
				}
			}
		})
	}
}

func TestFetchTriesTheNextMirror(t *testing.T) {
	data := payload(1000, 6)
	bad := payload(1000, 7)
	_, good := newServer(t, map[string][]byte{"f.bin": data})
	_, wrong := newServer(t, map[string][]byte{"f.bin": bad})
	_, empty := newServer(t, map[string][]byte{})
	d := Dataset{Name: "toy", Files: []File{file("f.bin", data, empty.URL+"/f.bin", wrong.URL+"/f.bin", good.URL+"/f.bin")}}
	var failures []string
	c := &Client{Logf: func(f string, a ...any) {
		if msg := fmt.Sprintf(f, a...); !strings.Contains(msg, "downloading") {
			failures = append(failures, msg)
		}
	}}
	if err := c.Fetch(context.Background(), d, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if len(failures) != 2 || !strings.Contains(failures[0], "404") || !strings.Contains(failures[1], "SHA-256") {
		t.Errorf("logged failures %q, want 2 (404, wrong checksum)", failures)
	}

	d.Files[0].URLs = d.Files[0].URLs[:2]
	err := c.Fetch(context.Background(), d, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), sum(bad)) {
		t.Errorf("every mirror failing gave %v, want each mirror's failure", err)
	}
}

func TestFetchReplacesADamagedFile(t *testing.T) {
	data := payload(2000, 8)
	_, ts := newServer(t, map[string][]byte{"f.bin": data})
	d := Dataset{Name: "toy", Files: []File{file("f.bin", data, ts.URL+"/f.bin")}}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f.bin"), payload(2000, 9), 0o644)
	if problems := Verify(d, dir); len(problems) != 1 || !strings.Contains(problems[0].Error(), "SHA-256") {
		t.Fatalf("Verify of a damaged file: %v", problems)
	}
	if err := (&Client{}).Fetch(context.Background(), d, dir); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, filepath.Join(dir, "f.bin")), data) {
		t.Error("the damaged file was not replaced")
	}
}

func TestFetchStopsWhenCancelledAndKeepsThePart(t *testing.T) {
	data := payload(100_000, 10)
	ctx, cancel := context.WithCancel(context.Background())
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Write(data[:40_000])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer ts.Close()
	d := Dataset{Name: "toy", Files: []File{file("f.bin", data, ts.URL+"/f.bin")}}
	dir := t.TempDir()
	// The user interrupts once the first bytes have arrived.
	c := &Client{NewBar: func(string, int64, int64) io.WriteCloser { return cancelOnWrite(cancel) }}
	err := c.Fetch(ctx, d, dir)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "resumes") {
		t.Fatalf("Fetch cancelled mid-download: %v", err)
	}
	fi, err := os.Stat(filepath.Join(dir, "f.bin.part"))
	if err != nil || fi.Size() == 0 {
		t.Errorf("the part downloaded before the cancel is not kept: %v", err)
	}
}

func TestUnpackRefusesEntriesOutsideTheFolder(t *testing.T) {
	for _, tc := range []struct {
		name string
		data func(*testing.T) []byte
	}{
		{"x.tar.gz", func(t *testing.T) []byte { return tarGz(t, map[string]string{"../evil": "x"}) }},
		{"x.zip", func(t *testing.T) []byte { return zipped(t, map[string]string{"a/../../evil": "x"}) }},
		{"y.tar.gz", func(t *testing.T) []byte { return tarGz(t, map[string]string{"/etc/evil": "x"}) }},
	} {
		root := t.TempDir()
		dir := filepath.Join(root, "in")
		os.Mkdir(dir, 0o755)
		archive := filepath.Join(dir, tc.name)
		os.WriteFile(archive, tc.data(t), 0o644)
		_, err := unpack(archive, dir)
		if err == nil || !strings.Contains(err.Error(), "outside") {
			t.Errorf("%s: unpack gave %v, want a refusal", tc.name, err)
		}
		if _, err := os.Stat(filepath.Join(root, "evil")); err == nil {
			t.Errorf("%s: wrote outside its folder", tc.name)
		}
	}
}

func TestUnpackNamesAnArchiveThatIsNotOne(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "x.tar.gz")
	os.WriteFile(archive, []byte("not gzip"), 0o644)
	_, err := unpack(archive, dir)
	if err == nil || !strings.Contains(err.Error(), archive) {
		t.Errorf("unpacking garbage gave %v, want an error naming %s", err, archive)
	}
}

func TestCatalogIsComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range Catalog() {
		if seen[d.Name] {
			t.Errorf("data set %s listed twice", d.Name)
		}
		seen[d.Name] = true
		if d.Title == "" || d.Source == "" || len(d.Files) == 0 {
			t.Errorf("%s: incomplete entry %+v", d.Name, d)
		}
		for _, f := range d.Files {
			if _, err := hex.DecodeString(f.SHA256); err != nil || len(f.SHA256) != 64 || strings.ToLower(f.SHA256) != f.SHA256 {
				t.Errorf("%s/%s: SHA-256 %q is not 64 lower-case hex digits", d.Name, f.Name, f.SHA256)
			}
			if f.Size <= 0 || len(f.URLs) == 0 {
				t.Errorf("%s/%s: size %d, %d URLs", d.Name, f.Name, f.Size, len(f.URLs))
			}
			for _, u := range f.URLs {
				if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
					t.Errorf("%s/%s: URL %q", d.Name, f.Name, u)
				}
			}
		}
	}
	for _, want := range []string{"mnist", "fashion-mnist", "cifar10", "cifar100", "ptb", "wikitext2"} {
		if !seen[want] {
			t.Errorf("the catalog lacks %s", want)
		}
	}
	if _, err := Lookup("imagenet"); err == nil || !strings.Contains(err.Error(), "cifar10") {
		t.Errorf("Lookup of an unknown name: %v, want the valid names", err)
	}
}

func TestWithMirrorReplacesTheMirrors(t *testing.T) {
	d, _ := Lookup("mnist")
	before := d.Files[0].URLs[0]
	m := d.WithMirror("http://localhost:1234/mnist")
	if got := m.Files[0].URLs; len(got) != 1 || got[0] != "http://localhost:1234/mnist/train-images-idx3-ubyte.gz" {
		t.Errorf("URLs %q, want only the mirror's", got)
	}
	if d.Files[0].URLs[0] != before {
		t.Error("WithMirror changed the data set it was called on")
	}
}

type nopBar struct{}

func (nopBar) Write(p []byte) (int, error) { return len(p), nil }
func (nopBar) Close() error                { return nil }

type cancelOnWrite context.CancelFunc

func (c cancelOnWrite) Write(p []byte) (int, error) { c(); return len(p), nil }
func (cancelOnWrite) Close() error                  { return nil }
