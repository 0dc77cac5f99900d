package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Client downloads the files of data sets. The zero value works: it uses
// http.DefaultClient, shows no progress and logs nothing.
type Client struct {
	HTTP *http.Client
	// NewBar, when set, is called for every download with its label, its size and the bytes
	// already there (a resumed download); what is downloaded next is written to the bar,
	// which is closed when the download ends.
	NewBar func(label string, size, done int64) io.WriteCloser
	Logf   func(format string, args ...any)
	// Attempts is how many times one mirror is asked for a file, each attempt resuming where
	// the previous one was cut off, before the next mirror is tried; 0 means 3.
	Attempts int
}

func (c *Client) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
	}
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// Fetch downloads into dir every file of d that is not there yet with the right checksum,
// and unpacks its archives. A download cut short stays in dir as NAME.part and is resumed,
// by this call or the next; a download whose checksum is wrong is removed. When every
// mirror fails, d's alternatives are tried in turn (see FetchFrom).
func (c *Client) Fetch(ctx context.Context, d Dataset, dir string) error {
	return c.FetchFrom(ctx, d, dir, AutoSource)
}

// FetchFrom is Fetch from the given source of d: AutoSource, MirrorsSource or the name of
// one of d's alternatives. AutoSource tries the source dir records first, so that a folder
// already converted is not fetched anew, then the mirrors, then the alternatives.
func (c *Client) FetchFrom(ctx context.Context, d Dataset, dir, source string) error {
	order, err := d.sourceOrder(dir, source)
	if err != nil {
		return fmt.Errorf("%s: %w", d.Name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s: %w", d.Name, err)
	}
	var failures []string
	for i, src := range order {
		err := c.fetchSource(ctx, d, dir, src)
		if err == nil {
			return nil
		}
		if len(order) == 1 || ctx.Err() != nil {
			return fmt.Errorf("%s: %w", d.Name, err)
		}
		failures = append(failures, fmt.Sprintf("%s: %s", d.describeSource(src), indent(err.Error())))
		if i+1 < len(order) {
			c.logf("%s: %s failed; trying %s", d.Name, d.describeSource(src), d.describeSource(order[i+1]))
		}
	}
	return fmt.Errorf("%s: every source failed:\n  %s", d.Name, strings.Join(failures, "\n  "))
}

// fetchSource makes dir hold d from one source.
func (c *Client) fetchSource(ctx context.Context, d Dataset, dir, source string) error {
	if alt, ok := d.alternative(source); ok {
		return c.convertFrom(ctx, alt, dir)
	}
	for _, f := range d.Files {
		if err := c.fetchFile(ctx, f, dir); err != nil {
			return err
		}
		if f.Unpack {
			if err := unpackOnce(f, dir, c.logf); err != nil {
				return err
			}
		}
	}
	return d.removeConversion(dir, c.logf)
}

// indent indents the lines after the first of a message that is listed under another.
func indent(msg string) string { return strings.ReplaceAll(msg, "\n", "\n  ") }

// fetchFile makes dir/f.Name a verified copy of f, trying its mirrors in order.
func (c *Client) fetchFile(ctx context.Context, f File, dir string) error {
	dest := filepath.Join(dir, f.Name)
	switch err := checkFile(dest, f); {
	case err == nil:
		c.logf("%s: present, checksum correct", dest)
		return nil
	case !errors.Is(err, os.ErrNotExist):
		c.logf("%s: %v; downloading it again", dest, err)
		if err := os.Remove(dest); err != nil {
			return err
		}
	}
	if len(f.URLs) == 0 {
		return fmt.Errorf("%s: no URL to download it from", f.Name)
	}
	part := dest + ".part"
	var failures []string
	for _, url := range f.URLs {
		c.logf("%s: downloading %.1f MB from %s", f.Name, float64(f.Size)/1e6, url)
		err := c.download(ctx, url, part, f)
		if err == nil {
			err = checkFile(part, f)
			if err != nil {
				os.Remove(part) // a wrong file is not worth resuming
			}
		}
		if err == nil {
			if err := os.Rename(part, dest); err != nil {
				return fmt.Errorf("%s: %w", f.Name, err)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: stopped; %s is kept and the next fetch resumes it: %w", f.Name, part, ctx.Err())
		}
		c.logf("%s: %v", url, err)
		failures = append(failures, fmt.Sprintf("%s: %v", url, err))
	}
	if fi, err := os.Stat(part); err == nil && fi.Size() == 0 {
		os.Remove(part) // nothing to resume: not worth a file that looks like a download begun
	}
	return fmt.Errorf("%s: every mirror failed:\n  %s", f.Name, strings.Join(failures, "\n  "))
}

// download brings part up to f.Size bytes from url, resuming what part holds and retrying
// when the connection is cut.
func (c *Client) download(ctx context.Context, url, part string, f File) error {
	attempts := c.Attempts
	if attempts <= 0 {
		attempts = 3
	}
	var err error
	for range attempts {
		var progressed bool
		progressed, err = c.downloadOnce(ctx, url, part, f)
		if err == nil || !progressed || ctx.Err() != nil {
			// Only a transfer cut short is worth asking the same mirror again.
			return err
		}
		c.logf("%s: %v; resuming", url, err)
	}
	return err
}

// downloadOnce makes one request for the bytes part lacks and appends them to it. It
// reports whether any bytes arrived.
func (c *Client) downloadOnce(ctx context.Context, url, part string, f File) (bool, error) {
	out, err := os.OpenFile(part, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return false, err
	}
	defer out.Close()
	have, err := out.Seek(0, io.SeekEnd)
	if err != nil {
		return false, err
	}
	if have > f.Size {
		// Longer than the file can be: not a resumable prefix.
		if err := out.Truncate(0); err != nil {
			return false, err
		}
		have, _ = out.Seek(0, io.SeekStart)
	}
	if have == f.Size {
		return false, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	// Some hosts refuse the default Go user agent as a crawler's.
	req.Header.Set("User-Agent", "Mozilla/5.0 (compatible; ssfusion-data-fetch)")
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		if start, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || start != have {
			return false, fmt.Errorf("asked for bytes from %d, the server sent Content-Range %q", have, resp.Header.Get("Content-Range"))
		}
	case resp.StatusCode == http.StatusOK:
		if have > 0 {
			c.logf("%s: the server does not resume downloads; starting again", url)
		}
		if err := out.Truncate(0); err != nil {
			return false, err
		}
		if have, err = out.Seek(0, io.SeekStart); err != nil {
			return false, err
		}
	default:
		return false, fmt.Errorf("server answered %s", resp.Status)
	}
	var dst io.Writer = out
	if c.NewBar != nil {
		bar := c.NewBar(f.Name, f.Size, have)
		defer bar.Close()
		dst = io.MultiWriter(out, bar)
	}
	// One byte more than the file lacks shows a server sending something longer.
	n, err := io.Copy(dst, io.LimitReader(resp.Body, f.Size-have+1))
	if err != nil {
		return n > 0, fmt.Errorf("connection cut after %d of %d bytes: %w", have+n, f.Size, err)
	}
	if have+n < f.Size {
		return true, fmt.Errorf("connection closed after %d of %d bytes", have+n, f.Size)
	}
	return true, nil
}

// rangeStart reads the first byte position of a Content-Range header, "bytes 100-199/200".
func rangeStart(h string) (int64, bool) {
	spec, ok := strings.CutPrefix(h, "bytes ")
	if !ok {
		return 0, false
	}
	first, _, ok := strings.Cut(spec, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(first, 10, 64)
	return n, err == nil
}

// checkFile compares the file at path with f's size and checksum; an absent file gives an
// error matching os.ErrNotExist.
func checkFile(path string, f File) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Size() != f.Size {
		return fmt.Errorf("%s is %d bytes, expected %d", path, fi.Size(), f.Size)
	}
	sum, err := fileSHA256(path)
	if err != nil {
		return err
	}
	if sum != f.SHA256 {
		return fmt.Errorf("%s has SHA-256 %s, expected %s (a damaged or different file)", path, sum, f.SHA256)
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	in, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer in.Close()
	h := sha256.New()
	if _, err := io.Copy(h, in); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
