package datasets

import (
	"path/filepath"
	"testing"

	"github.com/ssfusion/ssfusion/datasets/datasetstest"
)

func TestLoadCIFARPythonVersion(t *testing.T) {
	for _, tc := range []struct {
		name, subdir, labelKey string
		classes                int
		files                  []string
		load                   func(string) (*ImageSet, *ImageSet, error)
	}{
		{"cifar10", "cifar-10-batches-py", "labels", 10,
			[]string{"data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch"}, LoadCIFAR10},
		{"cifar100", "cifar-100-python", "fine_labels", 100, []string{"train", "test"}, LoadCIFAR100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			want := map[string]*ImageSet{
				"train": {Name: tc.name, C: 3, H: 32, W: 32, Classes: tc.classes},
				"test":  {Name: tc.name, C: 3, H: 32, W: 32, Classes: tc.classes},
			}
			for i, f := range tc.files {
				labels, pixels := datasetstest.Images(3+i, tc.classes, i)
				writeFile(t, filepath.Join(dir, tc.subdir, f), datasetstest.CIFARBatch(tc.labelKey, labels, pixels))
				split := "train"
				if i == len(tc.files)-1 {
					split = "test"
				}
				for _, l := range labels {
					want[split].Labels = append(want[split].Labels, int32(l))
				}
				want[split].Pixels = append(want[split].Pixels, pixels...)
			}
			train, test, err := tc.load(dir)
			if err != nil {
				t.Fatal(err)
			}
			sameImages(t, train, want["train"], tc.name)
			sameImages(t, test, want["test"], tc.name)
		})
	}
}

func TestLoadCIFARPythonVersionErrors(t *testing.T) {
	labels, pixels := datasetstest.Images(2, 10, 0)
	good := datasetstest.CIFARBatch("labels", labels, pixels)
	evil := (&datasetstest.Pickler{B: []byte{0x80, 2}}).Global("os", "system").Str("echo hi").B
	evil = append(evil, 0x85, 'R', '.')
	tests := []struct {
		name  string
		batch []byte
		parts []string
	}{
		{"truncated", good[:len(good)/2], []string{"data_batch_1", "python version"}},
		{"not a pickle", []byte("hello"), []string{"data_batch_1"}},
		{"wrong label key", datasetstest.CIFARBatch("fine_labels", labels, pixels), []string{`no "labels" entry`}},
		{"label out of range", datasetstest.CIFARBatch("labels", []int{1, 10}, pixels), []string{"label 1 is 10", "0..9"}},
		{"labels and images disagree", datasetstest.CIFARBatch("labels", []int{1, 2, 3}, pixels), []string{"shape"}},
		{"a class that is not numpy's", evil, []string{"os.system"}},
		{"a dict of nothing", []byte{0x80, 2, '}', '.'}, []string{`no "data" entry`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cifar-10-batches-py")
			writeFile(t, filepath.Join(dir, "data_batch_1"), tc.batch)
			_, _, err := LoadCIFAR10(filepath.Dir(dir))
			wantErr(t, err, append(tc.parts, "CIFAR-10", "data fetch cifar10")...)
		})
	}
}
