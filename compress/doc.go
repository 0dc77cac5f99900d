// Package compress owns the compression parts the sparsifying pipelines share: the
// selectors that pick the elements to send (exact top-k, DGC's sampled threshold,
// Gaussian-k, random-k, and the plain threshold scan of ExDyna), the error-feedback memory
// that keeps what was not sent, the density schedule (Config), the sparse wire codec, and
// the Compressor that puts them together the way GRACE composes compensate, compress and
// update-memory.
//
// It knows nothing of fusion buffers or collectives; package fusion builds pipelines from
// these parts.
package compress
