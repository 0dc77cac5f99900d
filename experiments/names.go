package experiments

import (
	"fmt"
	"path/filepath"
	"strings"
)

// runnerKeys are config keys an experiment may not set: the runner decides where each
// cell writes, so that every file it writes or deletes lies in the experiment's folder.
var runnerKeys = []string{"out", "resume", "profile-out"}

// checkName reports why s cannot name an experiment, whose folder it names: a plain name
// is letters, digits, '.', '_', '-' and '+', and does not start with a dot.
func checkName(s string) error {
	if s == "" || s[0] == '.' || strings.IndexFunc(s, notPlain) >= 0 {
		return fmt.Errorf("%q is not a plain name (letters, digits, '.', '_', '-', '+'; not starting with '.')", s)
	}
	return nil
}

// notPlain reports a rune a plain name cannot hold.
func notPlain(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("._-+", r)
}

// folderValue is the form a swept value takes in its cell's folder name: fmt.Sprint's, with
// a list's brackets dropped and its spaces made dashes ([30 60] is 30-60); an empty value
// (bandwidth "" is an unshaped link) stays empty. A value that needs more than that, such
// as a path, is an error: a folder name must not lead out of the experiment's folder.
func folderValue(key string, v any) (string, error) {
	s := fmt.Sprint(v)
	s = strings.NewReplacer("[", "", "]", "", " ", "-").Replace(s)
	if s == "" {
		return s, nil
	}
	if err := checkName(s); err != nil {
		return "", fmt.Errorf("matrix key %s: the value %v cannot be part of a folder name: %w", key, v, err)
	}
	return s, nil
}

// inside reports whether path lies in root, both resolved to absolute, cleaned paths.
func inside(root, path string) (bool, error) {
	r, err := filepath.Abs(root)
	if err != nil {
		return false, err
	}
	p, err := filepath.Abs(path)
	if err != nil {
		return false, err
	}
	rel, err := filepath.Rel(r, p)
	if err != nil {
		return false, nil
	}
	return rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)), nil
}
