package datasets

import (
	"errors"
	"fmt"
	"math"
)

// cropPad is the zero padding of the CIFAR random crop (torchvision's RandomCrop(32, padding=4)).
const cropPad = 4

// ImageLoaderConfig configures an ImageLoader.
type ImageLoaderConfig struct {
	Set         *ImageSet
	BatchSize   int
	Rank, World int // World 0 means 1
	Seed        int64
	Shuffle     bool      // false: natural order (evaluation)
	Augment     bool      // CIFAR augmentation: random crop with 4-pixel zero padding + horizontal flip (p=0.5)
	Mean, Std   []float32 // per channel normalisation applied after scaling to [0,1]; nil = no normalisation
	DropLast    bool      // training: drop the last incomplete batch; evaluation: keep it (padded)
	Limit       int       // if > 0, use at most this many samples of the shard per epoch (for --eval-samples)
}

// ImageLoader yields the batches of one rank's shard of an ImageSet, normalised and optionally
// augmented. Which samples a batch holds, and how they are augmented, depends only on the
// seed, the epoch, the rank and the batch index, so every rank agrees on the epoch's order and
// a loader positioned with Seek yields exactly what reading through would have.
// An ImageLoader is not safe for concurrent use.
type ImageLoader struct {
	cfg   ImageLoaderConfig
	world int
	chw   int
	// lut[c][p] is the normalised value of byte p in channel c: one table lookup per pixel
	// instead of a divide, a subtract and a multiply.
	lut   [][256]float32
	epoch int
	shard []int
	next  int // index of the batch Next returns
}

// NewImageLoader validates cfg and returns a loader positioned at the start of epoch 0.
func NewImageLoader(cfg ImageLoaderConfig) (*ImageLoader, error) {
	s := cfg.Set
	switch {
	case s == nil:
		return nil, errors.New("datasets: image loader: no data set")
	case s.C <= 0 || s.H <= 0 || s.W <= 0:
		return nil, fmt.Errorf("datasets: image loader: %s has image shape %dx%dx%d, want positive C, H, W", s.Name, s.C, s.H, s.W)
	case len(s.Pixels) != s.Len()*s.C*s.H*s.W:
		return nil, fmt.Errorf("datasets: image loader: %s has %d pixel bytes for %d images of %dx%dx%d, want %d",
			s.Name, len(s.Pixels), s.Len(), s.C, s.H, s.W, s.Len()*s.C*s.H*s.W)
	case cfg.BatchSize <= 0:
		return nil, fmt.Errorf("datasets: image loader: batch size %d, want > 0", cfg.BatchSize)
	case cfg.Limit < 0:
		return nil, fmt.Errorf("datasets: image loader: limit %d, want >= 0 (0 = no limit)", cfg.Limit)
	}
	world := cfg.World
	if world == 0 {
		world = 1
	}
	if world < 0 || cfg.Rank < 0 || cfg.Rank >= world {
		return nil, fmt.Errorf("datasets: image loader: rank %d out of range for world size %d", cfg.Rank, world)
	}
	if (cfg.Mean == nil) != (cfg.Std == nil) {
		return nil, errors.New("datasets: image loader: Mean and Std must be given together")
	}
	if cfg.Mean != nil && (len(cfg.Mean) != s.C || len(cfg.Std) != s.C) {
		return nil, fmt.Errorf("datasets: image loader: %d means and %d standard deviations for %d channels",
			len(cfg.Mean), len(cfg.Std), s.C)
	}
	for c, sd := range cfg.Std {
		if !(sd > 0) || math.IsInf(float64(sd), 0) || math.IsNaN(float64(cfg.Mean[c])) || math.IsInf(float64(cfg.Mean[c]), 0) {
			return nil, fmt.Errorf("datasets: image loader: channel %d has mean %v and std %v, want finite values and std > 0",
				c, cfg.Mean[c], sd)
		}
	}
	l := &ImageLoader{cfg: cfg, world: world, chw: s.C * s.H * s.W, lut: make([][256]float32, s.C)}
	for c := range l.lut {
		for p := range l.lut[c] {
			v := float32(p) / 255
			if cfg.Mean != nil {
				v = (v - cfg.Mean[c]) / cfg.Std[c]
			}
			l.lut[c][p] = v
		}
	}
	l.StartEpoch(0)
	if l.BatchesPerEpoch() == 0 {
		return nil, fmt.Errorf("datasets: image loader: %s: %d samples per rank (%d images over %d ranks) make no batch of %d (drop last %v)",
			s.Name, len(l.shard), s.Len(), world, cfg.BatchSize, cfg.DropLast)
	}
	return l, nil
}

// Samples is the number of samples of this rank's shard used per epoch.
func (l *ImageLoader) Samples() int { return len(l.shard) }

// BatchesPerEpoch is the number of batches Next yields in an epoch.
func (l *ImageLoader) BatchesPerEpoch() int {
	n, b := len(l.shard), l.cfg.BatchSize
	if l.cfg.DropLast {
		return n / b
	}
	return (n + b - 1) / b
}

// StartEpoch prepares the order of epoch e and positions the loader at its first batch.
func (l *ImageLoader) StartEpoch(e int) {
	l.epoch = e
	l.next = 0
	var order []int
	if l.cfg.Shuffle {
		order = EpochOrder(l.cfg.Set.Len(), l.cfg.Seed, e)
	} else {
		order = make([]int, l.cfg.Set.Len())
		for i := range order {
			order[i] = i
		}
	}
	l.shard = Shard(order, l.cfg.Rank, l.world)
	if l.cfg.Limit > 0 && l.cfg.Limit < len(l.shard) {
		l.shard = l.shard[:l.cfg.Limit]
	}
}

// Seek positions the loader at batch i of the current epoch, clamped to [0, BatchesPerEpoch].
func (l *ImageLoader) Seek(i int) {
	l.next = min(max(i, 0), l.BatchesPerEpoch())
}

// Next fills x (BatchSize*C*H*W float32, NCHW) and y (BatchSize) with the next batch and
// returns the number of valid samples; the rows after them (in a short last batch) are zeros
// with label 0. ok is false, and nothing is written, at the end of the epoch.
// It panics if x or y is too small for a batch.
func (l *ImageLoader) Next(x []float32, y []int32) (n int, ok bool) {
	b := l.cfg.BatchSize
	if len(x) < b*l.chw || len(y) < b {
		panic(fmt.Sprintf("datasets: ImageLoader.Next: buffers of %d and %d elements, want %d and %d",
			len(x), len(y), b*l.chw, b))
	}
	if l.next >= l.BatchesPerEpoch() {
		return 0, false
	}
	start := l.next * b
	n = min(b, len(l.shard)-start)
	for j := 0; j < n; j++ {
		pos := start + j
		idx := l.shard[pos]
		l.writeSample(x[j*l.chw:(j+1)*l.chw], idx, pos)
		y[j] = l.cfg.Set.Labels[idx]
	}
	clear(x[n*l.chw : b*l.chw])
	clear(y[n:b])
	l.next++
	return n, true
}

// writeSample writes image idx, which sits at position pos of the shard, normalised and, if
// configured, augmented. The augmentation is keyed by (seed, epoch, rank, pos) rather than
// drawn from a running generator so that it does not depend on what was read before.
func (l *ImageLoader) writeSample(dst []float32, idx, pos int) {
	s := l.cfg.Set
	plane := s.H * s.W
	src := s.Pixels[idx*l.chw : (idx+1)*l.chw]
	if !l.cfg.Augment {
		for c := 0; c < s.C; c++ {
			lut := &l.lut[c]
			d := dst[c*plane : (c+1)*plane]
			for i, p := range src[c*plane : (c+1)*plane] {
				d[i] = lut[p]
			}
		}
		return
	}
	dy, dx, flip := augmentation(l.cfg.Seed, l.epoch, l.cfg.Rank, pos)
	l.cropFlip(dst, src, dy, dx, flip)
}

// augmentation returns the crop offsets into the padded image (0..2*cropPad) and whether to
// flip for the sample at position pos of rank's shard in epoch.
func augmentation(seed int64, epoch, rank, pos int) (dy, dx int, flip bool) {
	k := hash(uint64(seed), uint64(epoch), uint64(rank), uint64(pos))
	const span = 2*cropPad + 1
	dy = int((k & 0xffffffff) * span >> 32)
	dx = int((k >> 32) * span >> 32)
	flip = mix64(k)&1 == 1
	return dy, dx, flip
}

// cropFlip writes the H x W window at (dy, dx) of the image zero-padded by cropPad on every
// side, mirrored left-right if flip. The padding is a zero byte before normalisation, as with
// torchvision's RandomCrop applied ahead of Normalize.
func (l *ImageLoader) cropFlip(dst []float32, src []uint8, dy, dx int, flip bool) {
	s := l.cfg.Set
	h, w := s.H, s.W
	for c := 0; c < s.C; c++ {
		lut := &l.lut[c]
		zero := lut[0]
		in := src[c*h*w : (c+1)*h*w]
		out := dst[c*h*w : (c+1)*h*w]
		for yy := 0; yy < h; yy++ {
			row := out[yy*w : (yy+1)*w]
			sy := yy + dy - cropPad
			if sy < 0 || sy >= h {
				for i := range row {
					row[i] = zero
				}
				continue
			}
			inRow := in[sy*w : (sy+1)*w]
			for xx := range row {
				cx := xx
				if flip {
					cx = w - 1 - xx
				}
				sx := cx + dx - cropPad
				if sx < 0 || sx >= w {
					row[xx] = zero
				} else {
					row[xx] = lut[inRow[sx]]
				}
			}
		}
	}
}
