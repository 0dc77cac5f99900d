package datasets

import (
	"bytes"
	"fmt"
	"os"
)

const cifarPixels = 3 * 32 * 32

var (
	cifar10Source = source{
		name: "CIFAR-10",
		files: []string{"data_batch_1.bin ... data_batch_5.bin and test_batch.bin (the binary version)",
			"or data_batch_1 ... data_batch_5 and test_batch (the python version)",
			"or a cifar-10-batches-bin/ or cifar-10-batches-py/ directory holding them"},
		url:    "https://www.cs.toronto.edu/~kriz/cifar.html",
		fetch:  "cifar10",
		subdir: []string{"cifar-10-batches-bin", "cifar-10-batches-py"},
	}
	cifar100Source = source{
		name: "CIFAR-100",
		files: []string{"train.bin and test.bin (the binary version)", "or train and test (the python version)",
			"or a cifar-100-binary/ or cifar-100-python/ directory holding them"},
		url:    "https://www.cs.toronto.edu/~kriz/cifar.html",
		fetch:  "cifar100",
		subdir: []string{"cifar-100-binary", "cifar-100-python"},
	}
)

// cifarFormat describes a record of the binary version: label bytes followed by the 3072 pixel
// bytes of a 32x32 image, channel-planar (all red, then green, then blue), which is NCHW.
type cifarFormat struct {
	labelBytes int   // 1 for CIFAR-10; 2 for CIFAR-100 (coarse, fine)
	labelAt    int   // which label byte is used
	maxLabel   []int // exclusive bound of every label byte, for validation
	pickleKey  string
}

func (f cifarFormat) record() int { return f.labelBytes + cifarPixels }

// LoadCIFAR10 reads CIFAR-10 from dir, dir/cifar-10-batches-bin/ (the binary version) or
// dir/cifar-10-batches-py/ (the python version, which torchvision downloads).
func LoadCIFAR10(dir string) (train, test *ImageSet, err error) {
	f := cifarFormat{labelBytes: 1, labelAt: 0, maxLabel: []int{10}, pickleKey: "labels"}
	return loadCIFARSplits(dir, "cifar10", 10, f, cifar10Source,
		[]string{"data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5"}, "test_batch")
}

// LoadCIFAR100 reads CIFAR-100 from dir, dir/cifar-100-binary/ or dir/cifar-100-python/,
// using the fine labels (100 classes).
func LoadCIFAR100(dir string) (train, test *ImageSet, err error) {
	f := cifarFormat{labelBytes: 2, labelAt: 1, maxLabel: []int{20, 100}, pickleKey: "fine_labels"}
	return loadCIFARSplits(dir, "cifar100", 100, f, cifar100Source, []string{"train"}, "test")
}

// loadCIFARSplits finds the folder holding the batches, in either version, and reads them;
// files are named without their .bin suffix.
func loadCIFARSplits(dir, name string, classes int, f cifarFormat, src source, trainFiles []string, testFile string) (train, test *ImageSet, err error) {
	first := trainFiles[0]
	d, err := src.dir(dir, first+".bin", first)
	if err != nil {
		return nil, nil, err
	}
	suffix := ".bin"
	if _, binary := firstExisting(d, []string{first + ".bin"}); !binary {
		suffix = ""
	}
	if train, err = loadCIFAR(d, name, classes, f, src, suffix, trainFiles...); err != nil {
		return nil, nil, err
	}
	if test, err = loadCIFAR(d, name, classes, f, src, suffix, testFile); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// loadCIFAR reads batch files of the binary version (suffix ".bin") or the python version.
func loadCIFAR(dir, name string, classes int, f cifarFormat, src source, suffix string, files ...string) (*ImageSet, error) {
	set := &ImageSet{Name: name, C: 3, H: 32, W: 32, Classes: classes}
	for _, file := range files {
		path, err := src.file(dir, file+suffix)
		if err != nil {
			return nil, err
		}
		if suffix == "" {
			err = readCIFARPickle(path, f.pickleKey, src, set)
		} else {
			err = readCIFARFile(path, f, src, set)
		}
		if err != nil {
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
		return fmt.Errorf("%s: %s is %d bytes, expected a positive multiple of %d (%s records of %d label byte(s) + %d pixel bytes; %d bytes for a batch of 10000)%s; %s",
			src.name, path, len(raw), rec, src.name, f.labelBytes, cifarPixels, 10000*rec, hint, src.getIt())
	}
	n := len(raw) / rec
	set.Pixels = append(set.Pixels, make([]uint8, n*cifarPixels)...)
	pixels := set.Pixels[len(set.Pixels)-n*cifarPixels:]
	for i := 0; i < n; i++ {
		r := raw[i*rec : (i+1)*rec]
		for j, bound := range f.maxLabel {
			if int(r[j]) >= bound {
				return fmt.Errorf("%s: %s: record %d has label byte %d = %d, expected 0..%d (is this the %s binary version? %s)",
					src.name, path, i, j, r[j], bound-1, src.name, src.getIt())
			}
		}
		set.Labels = append(set.Labels, int32(r[f.labelAt]))
		copy(pixels[i*cifarPixels:], r[f.labelBytes:])
	}
	return nil
}
