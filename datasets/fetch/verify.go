package fetch

import (
	"fmt"
	"path/filepath"
)

// Verify checks that dir holds every file of d with its pinned size and checksum, and the
// unpacked contents of its archives; or, when its SourceFile says so, every file converted
// from one of d's alternatives. It returns one error per problem, none when all is well.
func Verify(d Dataset, dir string) []error {
	if problems, ok := d.verifyRecorded(dir); ok {
		for i, p := range problems {
			problems[i] = fmt.Errorf("%s: %w", d.Name, p)
		}
		return problems
	}
	var problems []error
	for _, f := range d.Files {
		if err := checkFile(filepath.Join(dir, f.Name), f); err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", d.Name, err))
			continue
		}
		if f.Unpack {
			if err := checkUnpacked(f, dir); err != nil {
				problems = append(problems, fmt.Errorf("%s: %w", d.Name, err))
			}
		}
	}
	return problems
}
