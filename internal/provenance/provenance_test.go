package provenance

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestCollect(t *testing.T) {
	info := Collect("test kernel")
	if info.GoVersion != runtime.Version() || info.OS != runtime.GOOS || info.Arch != runtime.GOARCH {
		t.Errorf("toolchain %s %s/%s, want %s %s/%s", info.GoVersion, info.OS, info.Arch, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
	if info.GEMM != "test kernel" || info.GOMAXPROCS != runtime.GOMAXPROCS(0) || info.CPU == "" {
		t.Errorf("machine: gemm %q, gomaxprocs %d, cpu %q", info.GEMM, info.GOMAXPROCS, info.CPU)
	}
	if len(info.CommandLine) != len(os.Args) || info.CommandLine[0] != os.Args[0] {
		t.Errorf("command line %q, want %q", info.CommandLine, os.Args)
	}
}

func TestString(t *testing.T) {
	base := Info{Version: "v1.2.3", GoVersion: "go1.26.8", OS: "linux", Arch: "amd64"}
	for _, tc := range []struct {
		revision string
		modified bool
		want     string
	}{
		{"abc123", false, "v1.2.3, abc123, go1.26.8 linux/amd64"},
		{"abc123", true, "v1.2.3, abc123 (modified), go1.26.8 linux/amd64"},
		{"", false, "v1.2.3, unknown revision, go1.26.8 linux/amd64"},
	} {
		i := base
		i.Revision, i.Modified = tc.revision, tc.modified
		if got := i.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc, got, tc.want)
		}
	}
}

// A build without VCS stamping run from its module's git checkout takes the revision and
// the modified state from git; anywhere else it knows none.
func TestFromGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/m\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "go.mod")
	git("commit", "-q", "-m", "first")
	head := git("rev-parse", "HEAD")
	if err := os.MkdirAll(filepath.Join(dir, "results"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results", "report.md"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "go.mod", "results/report.md")
	git("commit", "-q", "-m", "results")
	head = git("rev-parse", "HEAD")
	t.Chdir(dir)
	if rev, modified := fromGit("example.com/m"); rev != head || modified {
		t.Errorf("clean checkout: %q modified %v, want %q unmodified", rev, modified, head)
	}
	if err := os.WriteFile(filepath.Join("results", "report.md"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if rev, modified := fromGit("example.com/m"); rev != head || modified {
		t.Errorf("checkout with new results only: %q modified %v, want %q unmodified", rev, modified, head)
	}
	if err := os.WriteFile("go.mod", []byte("module example.com/m\n\ngo 1.25\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if rev, modified := fromGit("example.com/m"); rev != head || !modified {
		t.Errorf("changed checkout: %q modified %v, want %q modified", rev, modified, head)
	}
	if rev, _ := fromGit("example.com/other"); rev != "" {
		t.Errorf("another module's checkout gave revision %q", rev)
	}
}
