package datasets

import (
	"encoding/binary"
	"fmt"
	"math"
)

// IDX magic numbers: two zero bytes, the element type (0x08 = unsigned byte) and the number of
// dimensions.
const (
	idxImageMagic = 0x00000803
	idxLabelMagic = 0x00000801
)

var (
	mnistSource = source{
		name: "MNIST",
		files: []string{"train-images-idx3-ubyte[.gz]", "train-labels-idx1-ubyte[.gz]",
			"t10k-images-idx3-ubyte[.gz]", "t10k-labels-idx1-ubyte[.gz]"},
		url:    "https://ossci-datasets.s3.amazonaws.com/mnist/",
		fetch:  "mnist",
		subdir: []string{"MNIST/raw"}, // where torchvision puts them
	}
	fashionSource = source{
		name:   "Fashion-MNIST",
		files:  mnistSource.files,
		url:    "https://github.com/zalandoresearch/fashion-mnist",
		fetch:  "fashion-mnist",
		subdir: []string{"FashionMNIST/raw"},
	}
)

// LoadMNIST reads the MNIST training and test sets from dir, or dir/MNIST/raw/ as torchvision
// lays them out: the four IDX files under their original names, gzip-compressed or not.
func LoadMNIST(dir string) (train, test *ImageSet, err error) {
	return loadIDXPair(dir, "mnist", mnistSource)
}

// LoadFashionMNIST reads Fashion-MNIST from dir or dir/FashionMNIST/raw/; it uses the same file
// names and format as MNIST.
func LoadFashionMNIST(dir string) (train, test *ImageSet, err error) {
	return loadIDXPair(dir, "fashion-mnist", fashionSource)
}

func loadIDXPair(dir, name string, src source) (train, test *ImageSet, err error) {
	d, err := src.dir(dir, idxCandidates("train-images-idx3-ubyte")...)
	if err != nil {
		return nil, nil, err
	}
	train, err = loadIDXSet(d, name, "train", src)
	if err != nil {
		return nil, nil, err
	}
	test, err = loadIDXSet(d, name, "t10k", src)
	if err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// idxCandidates lists the names a file is found under: the original one, gzipped, and the
// "train-images.idx3-ubyte" spelling some mirrors use.
func idxCandidates(base string) []string {
	dotted := base[:len(base)-len("-idx3-ubyte")] + "." + base[len(base)-len("idx3-ubyte"):]
	return []string{base, base + ".gz", dotted, dotted + ".gz"}
}

func loadIDXSet(dir, name, split string, src source) (*ImageSet, error) {
	imgPath, err := src.file(dir, idxCandidates(split+"-images-idx3-ubyte")...)
	if err != nil {
		return nil, err
	}
	lblPath, err := src.file(dir, idxCandidates(split+"-labels-idx1-ubyte")...)
	if err != nil {
		return nil, err
	}
	dims, pixels, err := readIDX(imgPath, idxImageMagic, src)
	if err != nil {
		return nil, err
	}
	if dims[0] == 0 {
		return nil, fmt.Errorf("%s: %s holds no images; get the file from %s", src.name, imgPath, src.url)
	}
	if dims[1] != 28 || dims[2] != 28 {
		return nil, fmt.Errorf("%s: %s holds %dx%d images, expected 28x28 (%s)",
			src.name, imgPath, dims[1], dims[2], src.url)
	}
	ldims, lbl, err := readIDX(lblPath, idxLabelMagic, src)
	if err != nil {
		return nil, err
	}
	if ldims[0] != dims[0] {
		return nil, fmt.Errorf("%s: %s holds %d labels but %s holds %d images; expected matching files from %s",
			src.name, lblPath, ldims[0], imgPath, dims[0], src.url)
	}
	labels := make([]int32, len(lbl))
	for i, l := range lbl {
		if l > 9 {
			return nil, fmt.Errorf("%s: %s: label %d of record %d is outside 0..9; get the file from %s",
				src.name, lblPath, l, i, src.url)
		}
		labels[i] = int32(l)
	}
	return &ImageSet{Name: name, C: 1, H: dims[1], W: dims[2], Classes: 10, Pixels: pixels, Labels: labels}, nil
}

// readIDX reads an unsigned-byte IDX file with the given magic and returns its dimensions and
// payload, checking that the payload is exactly as long as the dimensions say.
func readIDX(path string, magic uint32, src source) (dims []int, data []byte, err error) {
	raw, err := readMaybeGzip(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w (expected an IDX file from %s)", src.name, err, src.url)
	}
	ndim := int(magic & 0xff)
	header := 4 + 4*ndim
	if len(raw) < 4 {
		return nil, nil, fmt.Errorf("%s: %s is %d bytes, too short for an IDX file (IDX magic 0x%08x); get the file from %s",
			src.name, path, len(raw), magic, src.url)
	}
	if got := binary.BigEndian.Uint32(raw); got != magic {
		return nil, nil, fmt.Errorf("%s: %s starts with 0x%08x, expected IDX magic 0x%08x (unsigned bytes, %d dimensions); get the file from %s",
			src.name, path, got, magic, ndim, src.url)
	}
	if len(raw) < header {
		return nil, nil, fmt.Errorf("%s: %s is %d bytes, too short for an IDX header (IDX magic 0x%08x and %d dimensions, %d bytes); get the file from %s",
			src.name, path, len(raw), magic, ndim, header, src.url)
	}
	dims = make([]int, ndim)
	want := int64(1)
	for i := range dims {
		dims[i] = int(binary.BigEndian.Uint32(raw[4+4*i:]))
		if d := int64(dims[i]); d != 0 && want > math.MaxInt64/d {
			want = -1 // a corrupt header whose product overflows; reported below
		} else if want >= 0 {
			want *= d
		}
	}
	if got := int64(len(raw) - header); got != want {
		expected := fmt.Sprintf("expected %d", want)
		if want < 0 {
			expected = "expected more than can be addressed"
		}
		return nil, nil, fmt.Errorf("%s: %s has %d data bytes after its header, %s for dimensions %v (truncated or corrupt; get the file from %s)",
			src.name, path, got, expected, dims, src.url)
	}
	return dims, raw[header:], nil
}
