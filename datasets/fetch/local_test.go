package fetch

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPresenceIn: a folder holds none of a data set, part of it, or all of it checked.
func TestPresenceIn(t *testing.T) {
	data := payload(300, 7)
	d := Dataset{Name: "toy", Files: []File{file("a.bin", data, "https://example.com/a.bin")}}
	for _, tc := range []struct {
		name     string
		contents []byte // of a.bin; nil for no file
		folder   bool
		want     Presence
		text     string
	}{
		{"no folder", nil, false, Absent, "no"},
		{"an empty folder", nil, true, Partial, "partly"},
		{"a damaged file", []byte("damaged"), true, Partial, "partly"},
		{"the whole data set", data, true, Complete, "yes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "toy")
			if tc.folder {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tc.contents != nil {
				if err := os.WriteFile(filepath.Join(dir, "a.bin"), tc.contents, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := d.PresenceIn(dir); got != tc.want || got.String() != tc.text {
				t.Errorf("presence %d (%s), want %d (%s)", got, got, tc.want, tc.text)
			}
		})
	}
}

// TestHostIsTheFirstMirrors: a data set's host is that of its first file's first mirror,
// without scheme or path.
func TestHostIsTheFirstMirrors(t *testing.T) {
	for _, tc := range []struct {
		urls []string
		want string
	}{
		{[]string{"https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz", "https://mirror.example/c.tar.gz"}, "www.cs.toronto.edu"},
		{[]string{"http://yann.lecun.com/exdb/mnist/train-images-idx3-ubyte.gz"}, "yann.lecun.com"},
		{[]string{"https://host.example:8443"}, "host.example:8443"},
	} {
		d := Dataset{Name: "toy", Files: []File{{Name: "f", URLs: tc.urls}}}
		if got := d.Host(); got != tc.want {
			t.Errorf("host of %v: %q, want %q", tc.urls, got, tc.want)
		}
	}
	for _, d := range Catalog() {
		if h := d.Host(); h == "" || strings.Contains(h, "/") {
			t.Errorf("%s: host %q", d.Name, h)
		}
	}
}

// TestLookupAll: the data sets come in the order named, and an unknown name fails.
func TestLookupAll(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  []string // names found; nil with an error
		err   string
	}{
		{nil, nil, ""},
		{[]string{"cifar10", "mnist"}, []string{"cifar10", "mnist"}, ""},
		{[]string{"mnist", "imagenet"}, nil, "imagenet"},
	} {
		sets, err := LookupAll(tc.names)
		var got []string
		for _, d := range sets {
			got = append(got, d.Name)
		}
		if !slices.Equal(got, tc.want) || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("LookupAll(%v) = %v, %v; want %v, an error naming %q", tc.names, got, err, tc.want, tc.err)
		}
	}
}

// TestFetched lists the data sets with a folder under the root, in the catalog's order,
// and nothing else the root holds.
func TestFetched(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{"mnist", "cifar10", "not-a-data-set"} {
		if err := os.Mkdir(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var want, got []string
	for _, d := range Catalog() {
		if d.Name == "mnist" || d.Name == "cifar10" {
			want = append(want, d.Name)
		}
	}
	for _, d := range Fetched(root) {
		got = append(got, d.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("fetched %v, want %v", got, want)
	}
	if sets := Fetched(filepath.Join(root, "missing")); len(sets) != 0 {
		t.Errorf("a missing root holds %d data sets", len(sets))
	}
}
