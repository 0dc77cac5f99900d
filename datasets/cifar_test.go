package datasets

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
)

// cifarRecords makes n records of a CIFAR binary file with the given label bytes per record;
// labels[i] are the label bytes of record i, and the pixels encode i and salt.
func cifarRecords(labels [][]byte, salt int) (file []byte, pixels []uint8) {
	for i, lb := range labels {
		file = append(file, lb...)
		for j := 0; j < cifarPixels; j++ {
			p := uint8(i*17 + j*3 + salt)
			file = append(file, p)
			pixels = append(pixels, p)
		}
	}
	return file, pixels
}

func cifar10Fixture(t *testing.T, dir string) (train, test *ImageSet) {
	t.Helper()
	train = &ImageSet{Name: "cifar10", C: 3, H: 32, W: 32, Classes: 10}
	for b := 1; b <= 5; b++ {
		labels := [][]byte{{byte(b)}, {byte(b + 1)}, {9}}
		file, px := cifarRecords(labels, b)
		writeFile(t, filepath.Join(dir, "data_batch_"+string(rune('0'+b))+".bin"), file)
		train.Pixels = append(train.Pixels, px...)
		for _, l := range labels {
			train.Labels = append(train.Labels, int32(l[0]))
		}
	}
	file, px := cifarRecords([][]byte{{0}, {7}}, 99)
	writeFile(t, filepath.Join(dir, "test_batch.bin"), file)
	test = &ImageSet{Name: "cifar10", C: 3, H: 32, W: 32, Classes: 10, Pixels: px, Labels: []int32{0, 7}}
	return train, test
}

func cifar100Fixture(t *testing.T, dir string) (train, test *ImageSet) {
	t.Helper()
	// (coarse, fine) pairs; the fine label is the one used.
	file, px := cifarRecords([][]byte{{19, 99}, {0, 0}, {5, 42}, {3, 7}, {1, 1}}, 1)
	writeFile(t, filepath.Join(dir, "train.bin"), file)
	train = &ImageSet{Name: "cifar100", C: 3, H: 32, W: 32, Classes: 100, Pixels: px, Labels: []int32{99, 0, 42, 7, 1}}
	file, px = cifarRecords([][]byte{{2, 50}, {4, 60}, {6, 70}}, 2)
	writeFile(t, filepath.Join(dir, "test.bin"), file)
	test = &ImageSet{Name: "cifar100", C: 3, H: 32, W: 32, Classes: 100, Pixels: px, Labels: []int32{50, 60, 70}}
	return train, test
}

func TestLoadCIFAR(t *testing.T) {
	tests := []struct {
		name    string
		subdir  string
		fixture func(*testing.T, string) (*ImageSet, *ImageSet)
		load    func(string) (*ImageSet, *ImageSet, error)
		set     string
	}{
		{"cifar10", "", cifar10Fixture, LoadCIFAR10, "cifar10"},
		{"cifar10 archive dir", "cifar-10-batches-bin", cifar10Fixture, LoadCIFAR10, "cifar10"},
		{"cifar100", "", cifar100Fixture, LoadCIFAR100, "cifar100"},
		{"cifar100 archive dir", "cifar-100-binary", cifar100Fixture, LoadCIFAR100, "cifar100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			wantTrain, wantTest := tt.fixture(t, filepath.Join(dir, tt.subdir))
			train, test, err := tt.load(dir)
			if err != nil {
				t.Fatal(err)
			}
			sameImages(t, train, wantTrain, tt.set)
			sameImages(t, test, wantTest, tt.set)
		})
	}
}

func TestLoadCIFARErrors(t *testing.T) {
	const url = "https://www.cs.toronto.edu/~kriz/cifar.html"
	tests := []struct {
		name  string
		c100  bool
		edit  func(t *testing.T, dir string)
		parts []string
		isNot bool
	}{
		{
			name:  "missing directory",
			edit:  func(t *testing.T, dir string) {},
			parts: []string{"--data-dir", "data_batch_1.bin", "test_batch.bin", "cifar-10-batches-bin"},
			isNot: true,
		},
		{
			name: "missing test batch",
			edit: func(t *testing.T, dir string) {
				cifar10Fixture(t, dir)
				removeFile(t, filepath.Join(dir, "test_batch.bin"))
			},
			parts: []string{"test_batch.bin", "not found", "--data-dir"},
			isNot: true,
		},
		{
			name: "python version that is not a pickle",
			edit: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "data_batch_1"), []byte("pickle"))
			},
			parts: []string{"data_batch_1", "python version", "--data-dir"},
		},
		{
			name: "a batch of the python version among binary ones",
			edit: func(t *testing.T, dir string) {
				cifar10Fixture(t, dir)
				removeFile(t, filepath.Join(dir, "data_batch_3.bin"))
				writeFile(t, filepath.Join(dir, "data_batch_3"), []byte("pickle"))
			},
			parts: []string{"data_batch_3.bin", "not found"},
			isNot: true,
		},
		{
			name: "truncated",
			edit: func(t *testing.T, dir string) {
				cifar10Fixture(t, dir)
				file, _ := cifarRecords([][]byte{{1}, {2}}, 0)
				writeFile(t, filepath.Join(dir, "data_batch_4.bin"), file[:len(file)-1])
			},
			parts: []string{"data_batch_4.bin", "6145 bytes", "multiple of 3073", "30730000"},
		},
		{
			name: "empty",
			edit: func(t *testing.T, dir string) {
				cifar10Fixture(t, dir)
				writeFile(t, filepath.Join(dir, "test_batch.bin"), nil)
			},
			parts: []string{"test_batch.bin", "0 bytes", "3073"},
		},
		{
			name: "still gzipped",
			edit: func(t *testing.T, dir string) {
				cifar10Fixture(t, dir)
				writeFile(t, filepath.Join(dir, "data_batch_2.bin"), gzipBytes(t, []byte("tar")))
			},
			parts: []string{"data_batch_2.bin", "gzip-compressed"},
		},
		{
			name: "label out of range",
			edit: func(t *testing.T, dir string) {
				cifar10Fixture(t, dir)
				file, _ := cifarRecords([][]byte{{1}, {10}}, 0)
				writeFile(t, filepath.Join(dir, "data_batch_5.bin"), file)
			},
			parts: []string{"data_batch_5.bin", "record 1", "= 10", "0..9"},
		},
		{
			name: "cifar100 missing directory",
			c100: true,
			edit: func(t *testing.T, dir string) {},
			parts: []string{"--data-dir", "train.bin", "test.bin", "cifar-100-binary",
				"CIFAR-100"},
			isNot: true,
		},
		{
			name: "cifar100 fine label out of range",
			c100: true,
			edit: func(t *testing.T, dir string) {
				cifar100Fixture(t, dir)
				file, _ := cifarRecords([][]byte{{1, 100}}, 0)
				writeFile(t, filepath.Join(dir, "test.bin"), file)
			},
			parts: []string{"test.bin", "label byte 1 = 100", "0..99"},
		},
		{
			name: "cifar100 coarse label out of range",
			c100: true,
			edit: func(t *testing.T, dir string) {
				cifar100Fixture(t, dir)
				file, _ := cifarRecords([][]byte{{20, 1}}, 0)
				writeFile(t, filepath.Join(dir, "train.bin"), file)
			},
			parts: []string{"train.bin", "label byte 0 = 20", "0..19"},
		},
		{
			name: "cifar10 file given to cifar100",
			c100: true,
			edit: func(t *testing.T, dir string) {
				cifar100Fixture(t, dir)
				file, _ := cifarRecords([][]byte{{1}, {2}}, 0)
				writeFile(t, filepath.Join(dir, "train.bin"), file)
			},
			parts: []string{"train.bin", "6146 bytes", "multiple of 3074", "30740000"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "data")
			tt.edit(t, dir)
			load := LoadCIFAR10
			if tt.c100 {
				load = LoadCIFAR100
			}
			train, test, err := load(dir)
			wantErr(t, err, append(tt.parts, url)...)
			if train != nil || test != nil {
				t.Errorf("got data with an error")
			}
			if tt.isNot != errors.Is(err, fs.ErrNotExist) {
				t.Errorf("errors.Is(%v, fs.ErrNotExist) = %v, want %v", err, !tt.isNot, tt.isNot)
			}
		})
	}
}
