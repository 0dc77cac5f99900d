// Package provenance describes the build and the machine a result comes from: the program's
// version and source revision, the Go toolchain, the operating system, the CPU and its
// threads, the matrix-product kernel in use and the command line, so that two runs can be
// told apart long after they ended.
package provenance

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/klauspost/cpuid/v2"
	"golang.org/x/mod/modfile"
)

// Info is what a result records of where it came from.
type Info struct {
	// Version is the module version of the build, "(devel)" for one from a checkout.
	Version string `json:"version"`
	// Revision is the source revision the program was built from, "" when unknown. A
	// build made without VCS stamping (go run, or -buildvcs=false) takes it from git in the
	// working directory when that is this module's checkout; RevisionSource says which.
	Revision       string `json:"revision"`
	RevisionSource string `json:"revision_source,omitempty"`
	// Modified tells whether the source tree had uncommitted changes.
	Modified    bool     `json:"modified"`
	GoVersion   string   `json:"go_version"`
	OS          string   `json:"os"`
	Arch        string   `json:"arch"`
	CPU         string   `json:"cpu"`
	GEMM        string   `json:"gemm"`
	GOMAXPROCS  int      `json:"gomaxprocs"`
	CommandLine []string `json:"command_line"`
}

// Collect gathers the provenance of this process; gemm names the matrix-product kernel in
// use, which the caller knows.
func Collect(gemm string) Info {
	info := Info{
		GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		CPU: cpuName(), GEMM: gemm, GOMAXPROCS: runtime.GOMAXPROCS(0),
		CommandLine: append([]string(nil), os.Args...),
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	info.Version = bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision, info.RevisionSource = s.Value, "build"
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	if info.Revision == "" {
		info.Revision, info.Modified = fromGit(bi.Main.Path)
		if info.Revision != "" {
			info.RevisionSource = "git in the working directory"
		}
	}
	return info
}

// String is the line --version prints: the version, the revision and the toolchain.
func (i Info) String() string {
	return fmt.Sprintf("%s, %s, %s %s/%s", i.Version, i.RevisionText(), i.GoVersion, i.OS, i.Arch)
}

// RevisionText is the revision, marked "(modified)" for a tree with uncommitted changes,
// or "unknown revision".
func (i Info) RevisionText() string {
	switch {
	case i.Revision == "":
		return "unknown revision"
	case i.Modified:
		return i.Revision + " (modified)"
	}
	return i.Revision
}

// cpuName is the CPU's brand string, or its vendor and family where it has none.
func cpuName() string {
	if name := strings.TrimSpace(cpuid.CPU.BrandName); name != "" {
		return name
	}
	return fmt.Sprintf("%s family %d model %d", cpuid.CPU.VendorString, cpuid.CPU.Family, cpuid.CPU.Model)
}

// fromGit returns the revision and modified state of the git checkout in the working
// directory when its go.mod declares module, so that a build without VCS stamping run
// from its own checkout still knows its source. Anything else gives "". Changes under
// results/ do not count as modifications: experiments write there, and the second
// experiment of a session would otherwise call its source modified.
func fromGit(module string) (string, bool) {
	if module == "" || !declares(filepath.Join(".", "go.mod"), module) {
		return "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rev, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "", false
	}
	status, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results").Output()
	return strings.TrimSpace(string(rev)), err == nil && len(bytes.TrimSpace(status)) > 0
}

// declares tells whether the go.mod at path declares module.
func declares(path, module string) bool {
	data, err := os.ReadFile(path)
	return err == nil && modfile.ModulePath(data) == module
}
