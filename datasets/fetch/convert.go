package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ssfusion/ssfusion/internal/atomicfile"
)

// The sources FetchFrom knows besides the alternatives' names.
const (
	AutoSource    = "auto"    // the source the folder records, then the mirrors, then the alternatives
	MirrorsSource = "mirrors" // the catalog's mirrors only
)

// SourceFile names the file in a data set's folder that records the alternative its files
// were converted from. A folder without one holds the mirrors' files.
const SourceFile = "SOURCE"

// stagingPrefix starts the names of the temporary folders converted files are written in.
const stagingPrefix = ".convert-"

// Alternative is another copy of a data set, published in another format: an archive that
// is downloaded like any file of the catalog and converted into the files the readers of
// package datasets expect.
type Alternative struct {
	Name        string // what --source calls it
	Description string // what `data list` and `data verify` say the files were converted from
	Archive     File   // the download the conversion reads
	// Outputs are the converted files with pinned sizes and checksums, so that a conversion
	// is checked as a download is, by Fetch and by Verify. They have no URLs.
	Outputs []File
	// Notes go into SourceFile for whoever wonders how the files were made.
	Notes string
	// Convert reads the archive at the given path and returns the contents of every file of
	// Outputs by name.
	Convert func(archive string) (map[string][]byte, error)
}

// Sources lists the sources FetchFrom accepts for d.
func (d Dataset) Sources() []string {
	sources := []string{AutoSource, MirrorsSource}
	for _, a := range d.Alternatives {
		sources = append(sources, a.Name)
	}
	return sources
}

// alternativeNames lists the names of d's alternatives for a message.
func (d Dataset) alternativeNames() string {
	if len(d.Alternatives) == 0 {
		return "it has no other source than its mirrors"
	}
	return "valid: " + strings.Join(d.Sources()[2:], ", ")
}

func (d Dataset) alternative(name string) (Alternative, bool) {
	i := slices.IndexFunc(d.Alternatives, func(a Alternative) bool { return a.Name == name })
	if i < 0 {
		return Alternative{}, false
	}
	return d.Alternatives[i], true
}

func (d Dataset) describeSource(source string) string {
	if alt, ok := d.alternative(source); ok {
		return alt.Description
	}
	return "the mirrors"
}

// sourceOrder lists the sources FetchFrom tries, in order, for source.
func (d Dataset) sourceOrder(dir, source string) ([]string, error) {
	switch source {
	case AutoSource, "":
	case MirrorsSource:
		return []string{MirrorsSource}, nil
	default:
		if _, ok := d.alternative(source); !ok {
			return nil, fmt.Errorf("no source %q (valid: %s)", source, strings.Join(d.Sources(), ", "))
		}
		return []string{source}, nil
	}
	order := []string{MirrorsSource}
	for _, a := range d.Alternatives {
		order = append(order, a.Name)
	}
	if alt, ok := d.ConvertedIn(dir); ok {
		// A converted folder is kept, or repaired from its archive, rather than replaced by
		// the mirrors' copy behind the user's back.
		order = slices.DeleteFunc(order, func(s string) bool { return s == alt.Name })
		order = append([]string{alt.Name}, order...)
	}
	return order, nil
}

// ConvertedIn returns the alternative of d that dir's SourceFile records, if any.
func (d Dataset) ConvertedIn(dir string) (Alternative, bool) {
	name, err := recordedSource(dir)
	if err != nil || name == "" {
		return Alternative{}, false
	}
	return d.alternative(name)
}

// recordedSource reads the name of the source that dir's SourceFile records: "" when dir has
// no SourceFile.
func recordedSource(dir string) (string, error) {
	path := filepath.Join(dir, SourceFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	name, ok := strings.CutPrefix(first, "source: ")
	if name = strings.TrimSpace(name); !ok || name == "" {
		return "", fmt.Errorf("%s does not start with a line \"source: NAME\"", path)
	}
	return name, nil
}

// sourceRecord is the content of SourceFile for files converted from alt.
func sourceRecord(alt Alternative) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "source: %s\n", alt.Name)
	fmt.Fprintf(&b, "converted from %s by `ssfusion data fetch`\n", alt.Description)
	fmt.Fprintf(&b, "archive: %s, %d bytes, SHA-256 %s\n", alt.Archive.Name, alt.Archive.Size, alt.Archive.SHA256)
	for _, f := range alt.Outputs {
		fmt.Fprintf(&b, "file: %s, %d bytes, SHA-256 %s\n", f.Name, f.Size, f.SHA256)
	}
	if alt.Notes != "" {
		fmt.Fprintf(&b, "\n%s\n", strings.TrimSpace(alt.Notes))
	}
	return []byte(b.String())
}

// verifyRecorded checks dir against the alternative its SourceFile records, when it records
// one; ok is false when dir has no SourceFile and holds the mirrors' files, if any.
func (d Dataset) verifyRecorded(dir string) (problems []error, ok bool) {
	name, err := recordedSource(dir)
	switch {
	case err != nil:
		return []error{err}, true
	case name == "":
		return nil, false
	}
	alt, found := d.alternative(name)
	if !found {
		return []error{fmt.Errorf("%s records the source %q, which is not one %s is converted from (%s)",
			filepath.Join(dir, SourceFile), name, d.Name, d.alternativeNames())}, true
	}
	return verifyConversion(alt, dir), true
}

// verifyConversion checks every file converted from alt in dir against its pin.
func verifyConversion(alt Alternative, dir string) []error {
	var problems []error
	for _, f := range alt.Outputs {
		if err := checkFile(filepath.Join(dir, f.Name), f); err != nil {
			problems = append(problems, fmt.Errorf("converted from %s: %w", alt.Description, err))
		}
	}
	return problems
}

// convertFrom makes dir hold the files converted from alt, downloading and converting its
// archive unless they are there already.
func (c *Client) convertFrom(ctx context.Context, alt Alternative, dir string) error {
	if name, _ := recordedSource(dir); name == alt.Name && len(verifyConversion(alt, dir)) == 0 {
		c.logf("%s: converted from %s, checksums correct", dir, alt.Description)
		return nil
	}
	if err := c.fetchFile(ctx, alt.Archive, dir); err != nil {
		return err
	}
	archive := filepath.Join(dir, alt.Archive.Name)
	c.logf("%s: converting into %s", archive, strings.Join(outputNames(alt), ", "))
	files, err := alt.Convert(archive)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("stopped before installing the converted files; the next fetch converts %s again: %w", archive, err)
	}
	return installConversion(alt, dir, files)
}

func outputNames(alt Alternative) []string {
	names := make([]string, len(alt.Outputs))
	for i, f := range alt.Outputs {
		names[i] = f.Name
	}
	return names
}

// installConversion puts the files converted from alt into dir once they match their pins.
// The readers take an uncompressed file over a gzipped one of the same name, so a converted
// file must never sit beside the mirrors' files unrecorded, where Verify would check only
// theirs: the files are staged in a temporary folder, SourceFile is written, and only then
// are they moved in, each by a rename.
func installConversion(alt Alternative, dir string, files map[string][]byte) error {
	if err := checkOutputs(alt, files); err != nil {
		return err
	}
	if err := removeStaging(dir); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, stagingPrefix+"*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, f := range alt.Outputs {
		if err := writeSynced(filepath.Join(tmp, f.Name), files[f.Name]); err != nil {
			return err
		}
	}
	if err := atomicfile.Write(filepath.Join(dir, SourceFile), sourceRecord(alt)); err != nil {
		return err
	}
	for _, f := range alt.Outputs {
		if err := os.Rename(filepath.Join(tmp, f.Name), filepath.Join(dir, f.Name)); err != nil {
			return fmt.Errorf("installing %s: %w", f.Name, err)
		}
	}
	return nil
}

// checkOutputs compares what a conversion made with alt's pins: an archive with the right
// checksum that converts into something else means the converter changed.
func checkOutputs(alt Alternative, files map[string][]byte) error {
	for _, f := range alt.Outputs {
		data, ok := files[f.Name]
		if !ok {
			return fmt.Errorf("converting %s made no %s", alt.Archive.Name, f.Name)
		}
		if int64(len(data)) != f.Size {
			return fmt.Errorf("converting %s made %s of %d bytes, expected %d", alt.Archive.Name, f.Name, len(data), f.Size)
		}
		h := sha256.Sum256(data)
		if sum := hex.EncodeToString(h[:]); sum != f.SHA256 {
			return fmt.Errorf("converting %s made %s with SHA-256 %s, expected %s", alt.Archive.Name, f.Name, sum, f.SHA256)
		}
	}
	if len(files) != len(alt.Outputs) {
		return fmt.Errorf("converting %s made %d files, expected %d", alt.Archive.Name, len(files), len(alt.Outputs))
	}
	return nil
}

// removeStaging removes the staging folders an interrupted conversion left in dir.
func removeStaging(dir string) error {
	stale, err := filepath.Glob(filepath.Join(dir, stagingPrefix+"*"))
	if err != nil {
		return err
	}
	for _, s := range stale {
		if err := os.RemoveAll(s); err != nil {
			return err
		}
	}
	if _, err := atomicfile.RemoveStale(dir); err != nil {
		return err
	}
	return nil
}

// writeSynced writes data to path and flushes it to disk, so that the rename that follows
// never publishes a file whose content a crash could still lose.
func writeSynced(path string, data []byte) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := out.Write(data); err != nil {
		out.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// removeConversion removes what a conversion left in dir once the mirrors' files are there,
// since the readers would take its uncompressed files over the mirrors' gzipped ones. The
// archive stays, as downloads do.
func (d Dataset) removeConversion(dir string, logf func(string, ...any)) error {
	name, err := recordedSource(dir)
	if err != nil || name == "" {
		return err
	}
	if alt, ok := d.alternative(name); ok {
		logf("%s: removing the files converted from %s, so that the mirrors' files are read", dir, alt.Description)
		for _, f := range alt.Outputs {
			if err := os.Remove(filepath.Join(dir, f.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	// Last, so that an interruption leaves a record that makes Verify check what remains.
	return os.Remove(filepath.Join(dir, SourceFile))
}
