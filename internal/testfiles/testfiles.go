// Package testfiles writes the small trees of files that tests build their fixtures from.
package testfiles

import (
	"os"
	"path/filepath"
	"testing"
)

// Write creates each file of files, named by its slash-separated path under root, with its
// body, making the folders it needs; any failure ends the test.
func Write(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
