// Package atomicfile writes files so that a reader, or a run interrupted half-way, never
// sees half a file: the data goes to a temporary file in the same folder, which is then
// renamed over the target. A process killed before the rename leaves its temporary file
// behind, hidden and named after the target; RemoveStale clears them when the next run
// starts. Write has two fault points (see package faults): write-partial, with half the
// data in the temporary file, and write-before-rename.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ssfusion/ssfusion/internal/faults"
)

// Write writes data to path through a temporary file in the same folder and a rename.
func Write(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+tmpMark+"*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	half := len(data) / 2
	if _, err := tmp.Write(data[:half]); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := faults.At(faults.WritePartial, path); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := tmp.Write(data[half:]); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	// CreateTemp makes the file private; results are for everyone who can read the folder.
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := faults.At(faults.WriteBeforeRename, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// tmpMark follows a target's name in the names of its temporary files.
const tmpMark = ".tmp"

// RemoveStale removes the temporary files that writes into dir left when their process
// died before the rename, and returns their names. Call it only when no other process
// writes into dir.
func RemoveStale(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("looking for stale temporary files in %s: %w", dir, err)
	}
	var removed []string
	for _, e := range entries {
		if !IsTemporary(e.Name()) || e.IsDir() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("removing the stale temporary file %s: %w", path, err)
		}
		removed = append(removed, path)
	}
	return removed, nil
}

// IsTemporary reports whether name is the name of one of Write's temporary files.
func IsTemporary(name string) bool {
	base, _, ok := strings.Cut(name, tmpMark)
	return ok && strings.HasPrefix(base, ".") && len(base) > 1
}
