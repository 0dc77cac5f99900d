package trainer

import (
	"fmt"
	"os"
	"strings"

	"github.com/ssfusion/ssfusion/datasets"
	"github.com/ssfusion/ssfusion/datasets/fetch"
	"github.com/ssfusion/ssfusion/nets"
)

// datasetNames lists the names --dataset accepts.
var datasetNames = []string{"mnist", "fashion-mnist", "cifar10", "cifar100", "ptb", "wikitext2", "synthetic", "synthetic-text"}

// source yields the mini-batches of one rank's shard, epoch after epoch.
type source interface {
	// StepsPerEpoch is the number of full batches in an epoch of this rank's shard.
	StepsPerEpoch() int
	// StartEpoch rewinds to the first batch of epoch e.
	StartEpoch(e int)
	// Seek moves to batch i of the current epoch, as if i batches had been read.
	Seek(i int)
	// Next fills b and reports false at the end of the epoch.
	Next(b *nets.Batch) bool
	// SamplesPerBatch counts what a throughput figure counts: images, or tokens.
	SamplesPerBatch() int
}

// data is a loaded data set: train and test sources and the model shape they imply.
type data struct {
	train, test source
	spec        nets.Spec // input shape, classes or vocabulary
}

// loadData opens cfg.Dataset and builds rank's train shard and the test source.
func loadData(cfg *Config, rank, world int) (*data, error) {
	switch cfg.Dataset {
	case "ptb", "wikitext2", "synthetic-text":
		if !cfg.IsLanguageModel() {
			return nil, fmt.Errorf("dataset %s is text: it needs --model lstm, not %s", cfg.Dataset, cfg.Model)
		}
		corpus, err := loadCorpus(cfg)
		if err != nil {
			return nil, err
		}
		return textData(cfg, corpus, rank, world)
	case "mnist", "fashion-mnist", "cifar10", "cifar100", "synthetic":
		if cfg.IsLanguageModel() {
			return nil, fmt.Errorf("dataset %s holds images: --model %s needs a text data set (ptb, wikitext2, synthetic-text)", cfg.Dataset, cfg.Model)
		}
		train, test, err := loadImages(cfg)
		if err != nil {
			return nil, err
		}
		return imageData(cfg, train, test, rank, world)
	}
	return nil, fmt.Errorf("unknown dataset %q (valid: %s)", cfg.Dataset, strings.Join(datasetNames, ", "))
}

// dataDir is the folder that holds cfg.Dataset's files: --data-dir when given, else the
// folder `ssfusion data fetch` puts them in.
func dataDir(cfg *Config) (string, error) {
	if cfg.DataDir != "" {
		return cfg.DataDir, nil
	}
	dir := fetch.DefaultDir(cfg.Dataset)
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("dataset %s: no --data-dir given and %s does not exist; `ssfusion data fetch %s` downloads it there, or pass --data-dir with the folder that holds its files",
			cfg.Dataset, dir, cfg.Dataset)
	}
	return dir, nil
}

func loadImages(cfg *Config) (train, test *datasets.ImageSet, err error) {
	load := map[string]func(string) (*datasets.ImageSet, *datasets.ImageSet, error){
		"mnist": datasets.LoadMNIST, "fashion-mnist": datasets.LoadFashionMNIST,
		"cifar10": datasets.LoadCIFAR10, "cifar100": datasets.LoadCIFAR100,
	}[cfg.Dataset]
	if load == nil {
		// Synthetic images: CIFAR-shaped, so that every image model runs on them.
		train, test = datasets.SyntheticImageSplits(5000, 1000, 3, 32, 32, 10, cfg.Seed)
		return train, test, nil
	}
	if cfg.Dataset == "mnist" && cfg.DataDir == "" {
		return loadDefaultMNIST()
	}
	dir, err := dataDir(cfg)
	if err != nil {
		return nil, nil, err
	}
	return load(dir)
}

// loadDefaultMNIST reads the MNIST shipped in the Go module cache, or else the copy `ssfusion
// data fetch mnist` leaves, for a binary run where there is no module cache.
func loadDefaultMNIST() (train, test *datasets.ImageSet, err error) {
	dir, err := datasets.EmbeddedMNISTDir()
	if err == nil {
		return datasets.LoadMNIST(dir)
	}
	fetched := fetch.DefaultDir("mnist")
	if _, statErr := os.Stat(fetched); statErr != nil {
		return nil, nil, fmt.Errorf("%w (nor is there a %s folder)", err, fetched)
	}
	return datasets.LoadMNIST(fetched)
}

func loadCorpus(cfg *Config) (*datasets.Corpus, error) {
	load := map[string]func(string) (*datasets.Corpus, error){
		"ptb": datasets.LoadPTB, "wikitext2": datasets.LoadWikiText2,
	}[cfg.Dataset]
	if load == nil {
		return datasets.SyntheticText(200, 100000, cfg.Seed), nil
	}
	dir, err := dataDir(cfg)
	if err != nil {
		return nil, err
	}
	return load(dir)
}

func imageData(cfg *Config, train, test *datasets.ImageSet, rank, world int) (*data, error) {
	mean, std := train.ChannelStats()
	trainLoader, err := datasets.NewImageLoader(datasets.ImageLoaderConfig{
		Set: train, BatchSize: cfg.BatchSize, Rank: rank, World: world, Seed: cfg.Seed,
		Shuffle: true, Augment: cfg.Augment == "crop-flip", Mean: mean, Std: std, DropLast: true,
	})
	if err != nil {
		return nil, fmt.Errorf("%s training split: %w", cfg.Dataset, err)
	}
	if trainLoader.BatchesPerEpoch() == 0 {
		return nil, fmt.Errorf("%s: %d training images split over %d workers do not fill one batch of %d", cfg.Dataset, train.Len(), world, cfg.BatchSize)
	}
	testLoader, err := datasets.NewImageLoader(datasets.ImageLoaderConfig{
		Set: test, BatchSize: cfg.BatchSize, Rank: rank, World: world, Seed: cfg.Seed,
		Mean: mean, Std: std, Limit: cfg.EvalSamples / world,
	})
	if err != nil {
		return nil, fmt.Errorf("%s test split: %w", cfg.Dataset, err)
	}
	spec := nets.Spec{Channels: train.C, Height: train.H, Width: train.W, Classes: train.Classes}
	pixels := train.C * train.H * train.W
	return &data{
		train: &imageSource{loader: trainLoader, batch: cfg.BatchSize, pixels: pixels},
		test:  &imageSource{loader: testLoader, batch: cfg.BatchSize, pixels: pixels},
		spec:  spec,
	}, nil
}

type imageSource struct {
	loader        *datasets.ImageLoader
	batch, pixels int
}

func (s *imageSource) StepsPerEpoch() int   { return s.loader.BatchesPerEpoch() }
func (s *imageSource) StartEpoch(e int)     { s.loader.StartEpoch(e) }
func (s *imageSource) Seek(i int)           { s.loader.Seek(i) }
func (s *imageSource) SamplesPerBatch() int { return s.batch }

func (s *imageSource) Next(b *nets.Batch) bool {
	if len(b.X) != s.batch*s.pixels {
		b.X = make([]float32, s.batch*s.pixels)
		b.Labels = make([]int32, s.batch)
	}
	n, ok := s.loader.Next(b.X, b.Labels)
	b.N = n
	return ok
}

func textData(cfg *Config, corpus *datasets.Corpus, rank, world int) (*data, error) {
	train, err := datasets.Batchify(datasets.ShardTokens(corpus.Train, rank, world), cfg.BatchSize)
	if err != nil {
		return nil, fmt.Errorf("%s training split: %w", cfg.Dataset, err)
	}
	if train.Batches(cfg.SeqLen) == 0 {
		return nil, fmt.Errorf("%s: the training split is too short for one batch of %d streams x %d tokens per worker", cfg.Dataset, cfg.BatchSize, cfg.SeqLen)
	}
	test, err := datasets.Batchify(datasets.ShardTokens(corpus.Test, rank, world), cfg.BatchSize)
	if err != nil {
		return nil, fmt.Errorf("%s test split: %w", cfg.Dataset, err)
	}
	limit := test.Batches(cfg.SeqLen)
	if cfg.EvalSamples > 0 {
		perBatch := cfg.BatchSize * cfg.SeqLen * world
		limit = min(limit, max(1, (cfg.EvalSamples+perBatch-1)/perBatch))
	}
	return &data{
		train: &textSource{streams: train, seqLen: cfg.SeqLen, limit: train.Batches(cfg.SeqLen)},
		test:  &textSource{streams: test, seqLen: cfg.SeqLen, limit: limit},
		spec:  nets.Spec{Vocab: corpus.VocabSize()},
	}, nil
}

// textSource walks BPTT windows of batchified streams in order, as truncated BPTT needs.
type textSource struct {
	streams     *datasets.Streams
	seqLen      int
	limit, next int
}

func (s *textSource) StepsPerEpoch() int   { return s.limit }
func (s *textSource) StartEpoch(int)       { s.next = 0 }
func (s *textSource) Seek(i int)           { s.next = min(max(i, 0), s.limit) }
func (s *textSource) SamplesPerBatch() int { return s.streams.Streams() * s.seqLen }

func (s *textSource) Next(b *nets.Batch) bool {
	if s.next >= s.limit {
		return false
	}
	n := s.streams.Streams() * s.seqLen
	if len(b.Tokens) != n {
		b.Tokens = make([]int32, n)
		b.Labels = make([]int32, n)
	}
	s.streams.Batch(s.next, s.seqLen, b.Tokens, b.Labels)
	b.N = s.streams.Streams()
	s.next++
	return true
}

// CheckData loads the data set cfg names, so that a missing or damaged one is reported
// before a long experiment starts rather than when its cell comes up.
func CheckData(cfg *Config) error {
	_, err := loadData(cfg, 0, max(cfg.Workers, 1))
	return err
}

// CheckDataIn loads data set name from dir as a training of the default configuration
// would, with the LSTM for the text corpora (PTB, WikiText-2), so that a fetched data set
// is known to be readable, not only to match its checksums.
func CheckDataIn(name, dir string) error {
	cfg := Defaults()
	cfg.Dataset, cfg.DataDir = name, dir
	if name == "ptb" || name == "wikitext2" {
		cfg.Model = "lstm"
	}
	return CheckData(&cfg)
}
