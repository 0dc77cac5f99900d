package datasets

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func idxBytes(magic uint32, dims []int, data []byte) []byte {
	var buf bytes.Buffer
	binary.Write(&buf, binary.BigEndian, magic)
	for _, d := range dims {
		binary.Write(&buf, binary.BigEndian, uint32(d))
	}
	buf.Write(data)
	return buf.Bytes()
}

// mnistFixture is a small MNIST-format data set: images whose pixels encode their split and
// index, and labels i%10.
type mnistFixture struct {
	files map[string][]byte // base name -> uncompressed IDX content
	train *ImageSet
	test  *ImageSet
}

func newMNISTFixture(nTrain, nTest int) mnistFixture {
	f := mnistFixture{files: map[string][]byte{}}
	mk := func(split string, n, salt int) *ImageSet {
		s := &ImageSet{C: 1, H: 28, W: 28, Classes: 10, Pixels: make([]uint8, n*784), Labels: make([]int32, n)}
		lbl := make([]byte, n)
		for i := 0; i < n; i++ {
			for j := 0; j < 784; j++ {
				s.Pixels[i*784+j] = uint8(i*31 + j*7 + salt)
			}
			lbl[i] = byte((i + salt) % 10)
			s.Labels[i] = int32(lbl[i])
		}
		f.files[split+"-images-idx3-ubyte"] = idxBytes(idxImageMagic, []int{n, 28, 28}, s.Pixels)
		f.files[split+"-labels-idx1-ubyte"] = idxBytes(idxLabelMagic, []int{n}, lbl)
		return s
	}
	f.train = mk("train", nTrain, 0)
	f.test = mk("t10k", nTest, 3)
	return f
}

// write puts the fixture into dir, gzip-compressing the files named in gz (by base name) and
// adding suffix to their names.
func (f mnistFixture) write(t *testing.T, dir string, gz map[string]string) {
	t.Helper()
	for name, data := range f.files {
		if suffix, ok := gz[name]; ok {
			writeFile(t, filepath.Join(dir, name+suffix), gzipBytes(t, data))
			continue
		}
		writeFile(t, filepath.Join(dir, name), data)
	}
}

func sameImages(t *testing.T, got, want *ImageSet, name string) {
	t.Helper()
	if got.Name != name || got.C != want.C || got.H != want.H || got.W != want.W || got.Classes != want.Classes {
		t.Fatalf("got %s %dx%dx%d with %d classes, want %s %dx%dx%d with %d classes",
			got.Name, got.C, got.H, got.W, got.Classes, name, want.C, want.H, want.W, want.Classes)
	}
	if !bytes.Equal(got.Pixels, want.Pixels) {
		t.Errorf("pixels differ")
	}
	if len(got.Labels) != len(want.Labels) {
		t.Fatalf("got %d labels, want %d", len(got.Labels), len(want.Labels))
	}
	for i := range got.Labels {
		if got.Labels[i] != want.Labels[i] {
			t.Fatalf("label %d = %d, want %d", i, got.Labels[i], want.Labels[i])
		}
	}
}

func TestLoadMNISTFormats(t *testing.T) {
	all := func(suffix string) map[string]string {
		return map[string]string{"train-images-idx3-ubyte": suffix, "train-labels-idx1-ubyte": suffix,
			"t10k-images-idx3-ubyte": suffix, "t10k-labels-idx1-ubyte": suffix}
	}
	tests := []struct {
		name string
		gz   map[string]string
	}{
		{"raw", nil},
		{"gzip", all(".gz")},
		// Gzip is recognised by its magic bytes, not by the name.
		{"gzip without .gz", all("")},
		{"mixed", map[string]string{"train-images-idx3-ubyte": ".gz", "t10k-labels-idx1-ubyte": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newMNISTFixture(5, 3)
			dir := t.TempDir()
			fx.write(t, dir, tt.gz)
			fx.loadsFrom(t, dir)
		})
	}
}

// TestLoadMNISTTorchvisionLayout reads the folder torchvision's MNIST(root, download=True)
// and FashionMNIST leave: root/MNIST/raw/ and root/FashionMNIST/raw/ with the gzipped files.
func TestLoadMNISTTorchvisionLayout(t *testing.T) {
	fx := newMNISTFixture(4, 2)
	root := t.TempDir()
	gz := map[string]string{}
	for name := range fx.files {
		gz[name] = ".gz"
	}
	fx.write(t, filepath.Join(root, "MNIST", "raw"), gz)
	fx.write(t, filepath.Join(root, "FashionMNIST", "raw"), gz)
	fx.loadsFrom(t, root)
}

// loadsFrom checks that both IDX readers read the fixture from dir.
func (f mnistFixture) loadsFrom(t *testing.T, dir string) {
	t.Helper()
	for _, load := range []struct {
		name string
		fn   func(string) (*ImageSet, *ImageSet, error)
	}{{"mnist", LoadMNIST}, {"fashion-mnist", LoadFashionMNIST}} {
		train, test, err := load.fn(dir)
		if err != nil {
			t.Fatalf("%s: %v", load.name, err)
		}
		sameImages(t, train, f.train, load.name)
		sameImages(t, test, f.test, load.name)
	}
}

func TestLoadMNISTDottedNames(t *testing.T) {
	fx := newMNISTFixture(4, 2)
	dir := t.TempDir()
	for name, data := range fx.files {
		dotted := idxCandidates(name)[2]
		writeFile(t, filepath.Join(dir, dotted), data)
	}
	train, test, err := LoadMNIST(dir)
	if err != nil {
		t.Fatal(err)
	}
	sameImages(t, train, fx.train, "mnist")
	sameImages(t, test, fx.test, "mnist")
}

func TestLoadMNISTErrors(t *testing.T) {
	const url = "https://ossci-datasets.s3.amazonaws.com/mnist/"
	tests := []struct {
		name  string
		edit  func(t *testing.T, dir string, files map[string][]byte) // changes the fixture before writing
		gzip  bool
		parts []string // the error must mention these (besides the data set's URL)
		isNot bool     // the error wraps fs.ErrNotExist
	}{
		{
			name: "missing file",
			edit: func(t *testing.T, dir string, files map[string][]byte) {
				delete(files, "t10k-labels-idx1-ubyte")
			},
			parts: []string{"t10k-labels-idx1-ubyte", "not found", "--data-dir"},
			isNot: true,
		},
		{
			name: "no files at all",
			edit: func(t *testing.T, dir string, files map[string][]byte) {
				clear(files)
			},
			parts: []string{"train-images-idx3-ubyte", "--data-dir", "t10k-labels-idx1-ubyte[.gz]"},
			isNot: true,
		},
		{
			name: "truncated images",
			edit: func(t *testing.T, dir string, files map[string][]byte) {
				f := files["train-images-idx3-ubyte"]
				files["train-images-idx3-ubyte"] = f[:len(f)-100]
			},
			parts: []string{"train-images-idx3-ubyte", "expected 3920", "truncated"},
		},
		{
			name: "truncated gzip",
			edit: func(t *testing.T, dir string, files map[string][]byte) {
				z := gzipBytes(t, files["t10k-images-idx3-ubyte"])
				files["t10k-images-idx3-ubyte"] = z[:len(z)/2]
			},
			parts: []string{"t10k-images-idx3-ubyte", "truncated"},
		},
		{
			name: "header cut short",
			edit: func(t *testing.T, dir string, files map[string][]byte) {
				files["train-labels-idx1-ubyte"] = files["train-labels-idx1-ubyte"][:6]
			},
			parts: []string{"train-labels-idx1-ubyte", "IDX magic 0x00000801"},
		},
		{
			name: "empty file",
			edit: func(t *testing.T, dir string, files map[string][]byte) {
				files["train-images-idx3-ubyte"] = nil
			},
			parts: []string{"train-images-idx3-ubyte", "0 bytes", "IDX magic 0x00000803"},
		},
		{
			name: "wrong magic",
			edit: func(t *testing.T, dir string, files map[string][]byte) {
				// A label file where the image file should be.
				files["train-images-idx3-ubyte"] = files["train-labels-idx1-ubyte"]
			},
			parts: []string{"train-images-idx3-ubyte", "0x00000801", "IDX magic 0x00000803"},
		},
		{
			name: "wrong dimensions",
			edit: func(t *testing.T, dir string, files map[string][]byte) {
				files["t10k-images-idx3-ubyte"] = idxBytes(idxImageMagic, []int{2, 27, 28}, make([]byte, 2*27*28))
			},
			parts: []string{"t10k-images-idx3-ubyte", "27x28", "expected 28x28"},
		},
		{
			name: "dimensions disagree with size",
			edit: func(t *testing.T, dir string, files map[string][]byte) {
				files["t10k-images-idx3-ubyte"] = idxBytes(idxImageMagic, []int{1 << 30, 1 << 30, 28}, make([]byte, 10))
			},
			parts: []string{"t10k-images-idx3-ubyte", "10 data bytes"},
		},
		{
			name: "label count mismatch",
			edit: func(t *testing.T, dir string, files map[string][]byte) {
				files["train-labels-idx1-ubyte"] = idxBytes(idxLabelMagic, []int{4}, []byte{1, 2, 3, 4})
			},
			parts: []string{"train-labels-idx1-ubyte", "4 labels", "5 images"},
		},
		{
			name: "label out of range",
			edit: func(t *testing.T, dir string, files map[string][]byte) {
				files["train-labels-idx1-ubyte"] = idxBytes(idxLabelMagic, []int{5}, []byte{1, 2, 10, 4, 5})
			},
			parts: []string{"train-labels-idx1-ubyte", "label 10", "0..9"},
		},
		{
			name: "no images",
			edit: func(t *testing.T, dir string, files map[string][]byte) {
				files["train-images-idx3-ubyte"] = idxBytes(idxImageMagic, []int{0, 28, 28}, nil)
				files["train-labels-idx1-ubyte"] = idxBytes(idxLabelMagic, []int{0}, nil)
			},
			parts: []string{"train-images-idx3-ubyte", "no images"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newMNISTFixture(5, 3)
			dir := t.TempDir()
			tt.edit(t, dir, fx.files)
			fx.write(t, dir, nil)
			train, test, err := LoadMNIST(dir)
			wantErr(t, err, append(tt.parts, "MNIST", url)...)
			if train != nil || test != nil {
				t.Errorf("got data with an error")
			}
			if tt.isNot && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("error %v does not wrap fs.ErrNotExist", err)
			}
		})
	}
}

func TestLoadMNISTMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nope")
	_, _, err := LoadFashionMNIST(dir)
	wantErr(t, err, dir, "--data-dir", "train-images-idx3-ubyte[.gz]", "t10k-labels-idx1-ubyte[.gz]",
		"https://github.com/zalandoresearch/fashion-mnist")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %v does not wrap fs.ErrNotExist", err)
	}

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = LoadMNIST(file)
	wantErr(t, err, file, "not a directory", "--data-dir")
}
