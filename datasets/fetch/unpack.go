package fetch

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ssfusion/ssfusion/internal/atomicfile"
)

// stampSuffix names the file that records an archive's unpacking: its checksum, then the
// top-level entries it created, one per line.
const stampSuffix = ".unpacked"

// unpackOnce unpacks the archive f in dir unless its stamp says this very archive already
// was and what it created is still there.
func unpackOnce(f File, dir string, logf func(string, ...any)) error {
	archive := filepath.Join(dir, f.Name)
	if err := checkUnpacked(f, dir); err == nil {
		return nil
	}
	logf("%s: unpacking", archive)
	entries, err := unpack(archive, dir)
	if err != nil {
		return err
	}
	stamp := f.SHA256 + "\n" + strings.Join(entries, "\n") + "\n"
	return atomicfile.Write(archive+stampSuffix, []byte(stamp))
}

// checkUnpacked reports whether archive f was unpacked in dir and its entries are there.
func checkUnpacked(f File, dir string) error {
	stampPath := filepath.Join(dir, f.Name+stampSuffix)
	stamp, err := os.ReadFile(stampPath)
	if err != nil {
		return fmt.Errorf("%s was not unpacked: %w", f.Name, err)
	}
	lines := strings.Split(strings.TrimSpace(string(stamp)), "\n")
	if lines[0] != f.SHA256 {
		return fmt.Errorf("%s records the unpacking of a different archive", stampPath)
	}
	for _, e := range lines[1:] {
		if _, err := os.Stat(filepath.Join(dir, e)); err != nil {
			return fmt.Errorf("%s was unpacked, but %w", f.Name, err)
		}
	}
	return nil
}

// unpack extracts the archive at path into dir, through a temporary folder so that an
// interrupted extraction leaves nothing half-written in place, and returns the top-level
// entries it created.
func unpack(archive, dir string) ([]string, error) {
	tmp, err := os.MkdirTemp(dir, ".unpack-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	switch name := strings.ToLower(archive); {
	case strings.HasSuffix(name, ".zip"):
		err = unzip(archive, tmp)
	case strings.HasSuffix(name, ".tar.gz"), strings.HasSuffix(name, ".tgz"):
		err = untar(archive, tmp)
	default:
		err = errors.New("not a .zip, .tar.gz or .tgz archive")
	}
	if err != nil {
		return nil, fmt.Errorf("unpacking %s: %w", archive, err)
	}
	top, err := os.ReadDir(tmp)
	if err != nil {
		return nil, err
	}
	var entries []string
	for _, e := range top {
		target := filepath.Join(dir, e.Name())
		if err := os.RemoveAll(target); err != nil {
			return nil, err
		}
		if err := os.Rename(filepath.Join(tmp, e.Name()), target); err != nil {
			return nil, err
		}
		entries = append(entries, e.Name())
	}
	slices.Sort(entries)
	return entries, nil
}

// safePath maps an archive entry's name to a path under root, refusing names that would
// land outside it.
func safePath(root, name string) (string, error) {
	clean := path.Clean(strings.ReplaceAll(name, `\`, "/"))
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("entry %q points outside the folder it is unpacked in", name)
	}
	return filepath.Join(root, filepath.FromSlash(clean)), nil
}

func untar(archive, root string) error {
	in, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		target, err := safePath(root, h.Name)
		if err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			err = writeEntry(target, tr)
		default:
			// Links and devices: none of the data sets has any, and they are what an
			// archive would use to write outside its folder.
			continue
		}
		if err != nil {
			return err
		}
	}
}

func unzip(archive, root string) error {
	zr, err := zip.OpenReader(archive)
	if err != nil {
		return err
	}
	defer zr.Close()
	for _, f := range zr.File {
		target, err := safePath(root, f.Name)
		if err != nil {
			return err
		}
		if f.FileInfo().IsDir() {
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			continue
		}
		if !f.Mode().IsRegular() {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		err = writeEntry(target, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	return nil
}

func writeEntry(target string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
