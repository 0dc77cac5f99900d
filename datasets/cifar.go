package datasets

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

const cifarPixels = 3 * 32 * 32

var (
	cifar10Source = source{
		name: "CIFAR-10",
		files: []string{"data_batch_1.bin ... data_batch_5.bin", "test_batch.bin",
			"or a cifar-10-batches-bin/ directory holding them"},
		url:    "https://www.cs.toronto.edu/~kriz/cifar.html (the binary version)",
		subdir: []string{"cifar-10-batches-bin"},
	}
	cifar100Source = source{
		name:   "CIFAR-100",
		files:  []string{"train.bin", "test.bin", "or a cifar-100-binary/ directory holding them"},
		url:    "https://www.cs.toronto.edu/~kriz/cifar.html (the binary version)",
		subdir: []string{"cifar-100-binary"},
	}
)

// cifarFormat describes a record of the binary version: label bytes followed by the 3072 pixel
// bytes of a 32x32 image, channel-planar (all red, then green, then blue), which is NCHW.
type cifarFormat struct {
	labelBytes int   // 1 for CIFAR-10; 2 for CIFAR-100 (coarse, fine)
	labelAt    int   // which label byte is used
	maxLabel   []int // exclusive bound of every label byte, for validation
}

func (f cifarFormat) record() int { return f.labelBytes + cifarPixels }

// LoadCIFAR10 reads the binary version of CIFAR-10 from dir or dir/cifar-10-batches-bin/.
func LoadCIFAR10(dir string) (train, test *ImageSet, err error) {
	src := cifar10Source
	d, err := src.dir(dir, "data_batch_1.bin")
	if err != nil {
		return nil, nil, err
	}
	f := cifarFormat{labelBytes: 1, labelAt: 0, maxLabel: []int{10}}
	train, err = loadCIFAR(d, "cifar10", 10, f, src,
		"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin")
	if err != nil {
		return nil, nil, err
	}
	test, err = loadCIFAR(d, "cifar10", 10, f, src, "test_batch.bin")
	if err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// LoadCIFAR100 reads the binary version of CIFAR-100 from dir or dir/cifar-100-binary/, using
// the fine labels (100 classes).
func LoadCIFAR100(dir string) (train, test *ImageSet, err error) {
	src := cifar100Source
	d, err := src.dir(dir, "train.bin")
	if err != nil {
		return nil, nil, err
	}
	f := cifarFormat{labelBytes: 2, labelAt: 1, maxLabel: []int{20, 100}}
	train, err = loadCIFAR(d, "cifar100", 100, f, src, "train.bin")
	if err != nil {
		return nil, nil, err
	}
	test, err = loadCIFAR(d, "cifar100", 100, f, src, "test.bin")
	if err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

func loadCIFAR(dir, name string, classes int, f cifarFormat, src source, files ...string) (*ImageSet, error) {
	set := &ImageSet{Name: name, C: 3, H: 32, W: 32, Classes: classes}
	for _, file := range files {
		path, err := src.file(dir, file)
		if err != nil {
			if _, ok := firstExisting(dir, []string{strings.TrimSuffix(file, ".bin")}); ok {
				err = fmt.Errorf("%w (found %s without .bin: that is the Python version; the binary version is needed)",
					err, strings.TrimSuffix(file, ".bin"))
			}
			return nil, err
		}
		if err := readCIFARFile(path, f, src, set); err != nil {
			return nil, err
		}
	}
	return set, nil
}

// readCIFARFile appends the records of one batch file to set.
func readCIFARFile(path string, f cifarFormat, src source, set *ImageSet) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: reading %s: %w", src.name, path, err)
	}
	rec := f.record()
	if len(raw) == 0 || len(raw)%rec != 0 {
		hint := ""
		if bytes.HasPrefix(raw, gzipMagic) {
			hint = " (the file is gzip-compressed: extract the .tar.gz archive first)"
		}
		return fmt.Errorf("%s: %s is %d bytes, expected a positive multiple of %d (%s records of %d label byte(s) + %d pixel bytes; %d bytes for a batch of 10000)%s; get the binary version from %s",
			src.name, path, len(raw), rec, src.name, f.labelBytes, cifarPixels, 10000*rec, hint, src.url)
	}
	n := len(raw) / rec
	set.Pixels = append(set.Pixels, make([]uint8, n*cifarPixels)...)
	pixels := set.Pixels[len(set.Pixels)-n*cifarPixels:]
	for i := 0; i < n; i++ {
		r := raw[i*rec : (i+1)*rec]
		for j, bound := range f.maxLabel {
			if int(r[j]) >= bound {
				return fmt.Errorf("%s: %s: record %d has label byte %d = %d, expected 0..%d (is this the %s binary version? %s)",
					src.name, path, i, j, r[j], bound-1, src.name, src.url)
			}
		}
		set.Labels = append(set.Labels, int32(r[f.labelAt]))
		copy(pixels[i*cifarPixels:], r[f.labelBytes:])
	}
	return nil
}
