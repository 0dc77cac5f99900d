package atomicfile

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/internal/faults"
)

func TestWriteReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "summary.json")
	for _, data := range []string{"first version", "second"} {
		if err := Write(path, []byte(data)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != data {
			t.Fatalf("read %q, %v; want %q", got, err, data)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in the folder, want only the target", len(entries))
	}
}

// TestRemoveStale removes the temporary files a dead writer left, and nothing else.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	names := []string{".summary.json.tmp123", ".report.md.tmp9", "summary.json", ".hidden", "data.tmp1", ".tmp5"}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := RemoveStale(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, ".report.md.tmp9"), filepath.Join(dir, ".summary.json.tmp123")}
	slices.Sort(removed)
	if !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 4 {
		t.Errorf("%d files left, want 4", len(entries))
	}
	if removed, err := RemoveStale(filepath.Join(dir, "absent")); err != nil || removed != nil {
		t.Errorf("absent folder: %q, %v", removed, err)
	}
}

const childEnv = "SSF_ATOMICFILE_TEST_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		if err := Write(path, []byte("the new version, never seen whole")); err != nil {
			os.Stdout.WriteString(err.Error())
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestKilledWriterLeavesTheOldFile: a process killed at either fault point of Write leaves
// the file as it was, and a temporary file that RemoveStale clears; a fault with
// action=error fails the write with an error naming the file.
func TestKilledWriterLeavesTheOldFile(t *testing.T) {
	for _, tc := range []struct{ spec, err string }{
		{"point=write-partial", ""},
		{"point=write-before-rename", ""},
		{"point=write-before-rename action=error", "writing"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "summary.json")
			if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run", "XXX")
			cmd.Env = append(os.Environ(), childEnv+"="+path, faults.Env+"="+tc.spec)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the writer succeeded; output %q", out)
			}
			if !strings.Contains(string(out), tc.err) || tc.err != "" && !strings.Contains(string(out), path) {
				t.Errorf("output %q, want %q and the file's path", out, tc.err)
			}
			if got, _ := os.ReadFile(path); string(got) != "old" {
				t.Errorf("the file holds %q, want the old version", got)
			}
			removed, err := RemoveStale(dir)
			if err != nil {
				t.Fatal(err)
			}
			if tc.err == "" && len(removed) != 1 {
				t.Errorf("removed %q, want the killed writer's temporary file", removed)
			}
		})
	}
}
