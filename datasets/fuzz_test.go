package datasets

import (
	"path/filepath"
	"testing"
)

// checkImages fails the test unless set is a consistent image set: as many labels as
// images, every label a class.
func checkImages(t *testing.T, set *ImageSet) {
	t.Helper()
	if set.Len()*set.C*set.H*set.W != len(set.Pixels) || len(set.Labels) != set.Len() {
		t.Fatalf("%s: %d labels and %d pixels for %d images of %dx%dx%d", set.Name, len(set.Labels), len(set.Pixels), set.Len(), set.C, set.H, set.W)
	}
	for i, l := range set.Labels {
		if l < 0 || int(l) >= set.Classes {
			t.Fatalf("%s: label %d of image %d is not one of %d classes", set.Name, l, i, set.Classes)
		}
	}
}

// FuzzLoadMNIST puts arbitrary bytes in place of one MNIST file, plain or gzip-compressed;
// loading fails with an error or gives consistent sets, and never panics.
func FuzzLoadMNIST(f *testing.F) {
	fix := newMNISTFixture(3, 2)
	for _, name := range []string{"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-labels-idx1-ubyte"} {
		f.Add(uint8(0), fix.files[name])
		f.Add(uint8(1), fix.files[name][:len(fix.files[name])/2])
	}
	f.Add(uint8(2), idxBytes(idxLabelMagic, []int{3}, []byte{0, 1, 200}))
	f.Add(uint8(3), idxBytes(idxImageMagic, []int{1 << 30, 1 << 30, 1 << 30}, nil))
	names := []string{"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		dir := t.TempDir()
		fix.write(t, dir, nil)
		name := names[int(which)%len(names)]
		if which&4 != 0 {
			removeFile(t, filepath.Join(dir, name))
			name += ".gz"
			data = gzipBytes(t, data)
		}
		writeFile(t, filepath.Join(dir, name), data)
		train, test, err := LoadMNIST(dir)
		if err != nil {
			return
		}
		checkImages(t, train)
		checkImages(t, test)
	})
}

// FuzzLoadCIFAR10 puts arbitrary bytes in place of one CIFAR-10 batch file.
func FuzzLoadCIFAR10(f *testing.F) {
	file, _ := cifarRecords([][]byte{{3}, {9}}, 1)
	f.Add(uint8(0), file)
	f.Add(uint8(5), file[:len(file)-1])
	f.Add(uint8(2), append([]byte{10}, file[1:]...))
	names := []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		dir := t.TempDir()
		cifar10Fixture(t, dir)
		writeFile(t, filepath.Join(dir, names[int(which)%len(names)]), data)
		train, test, err := LoadCIFAR10(dir)
		if err != nil {
			return
		}
		checkImages(t, train)
		checkImages(t, test)
	})
}

// FuzzLoadPTB puts arbitrary bytes in place of one PTB file: loading fails with an error
// or gives token ids inside the vocabulary.
func FuzzLoadPTB(f *testing.F) {
	f.Add(uint8(0), []byte("the cat sat\non the mat\n"))
	f.Add(uint8(1), []byte("\xff\xfe not utf-8"))
	f.Add(uint8(2), []byte(" \n\t "))
	f.Add(uint8(0), []byte("a\x00b"))
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		dir := t.TempDir()
		writeCorpus(t, dir, ptbNames, "the cat sat\n", "the cat\n", "sat the\n")
		writeFile(t, filepath.Join(dir, ptbNames[int(which)%len(ptbNames)]), data)
		c, err := LoadPTB(dir)
		if err != nil {
			return
		}
		for _, split := range [][]int32{c.Train, c.Valid, c.Test} {
			for _, id := range split {
				if id < 0 || int(id) >= c.VocabSize() {
					t.Fatalf("token id %d outside a vocabulary of %d", id, c.VocabSize())
				}
			}
		}
	})
}
