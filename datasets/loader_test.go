package datasets

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// indexedSet is a set whose label is the image's index, so batches show which samples they hold.
func indexedSet(n, c, h, w int) *ImageSet {
	s := &ImageSet{Name: "indexed", C: c, H: h, W: w, Classes: n, Pixels: make([]uint8, n*c*h*w), Labels: make([]int32, n)}
	for i := 0; i < n; i++ {
		s.Labels[i] = int32(i)
		for j := 0; j < c*h*w; j++ {
			s.Pixels[i*c*h*w+j] = uint8(i*13 + j)
		}
	}
	return s
}

func newLoader(t *testing.T, cfg ImageLoaderConfig) *ImageLoader {
	t.Helper()
	l, err := NewImageLoader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

type batch struct {
	n int
	x []float32
	y []int32
}

// readEpoch reads every batch of epoch e.
func readEpoch(l *ImageLoader, e int) []batch {
	l.StartEpoch(e)
	return readEpochFrom(l)
}

// readEpochFrom reads the batches left in the current epoch.
func readEpochFrom(l *ImageLoader) []batch {
	var out []batch
	chw := l.cfg.Set.C * l.cfg.Set.H * l.cfg.Set.W
	for {
		b := batch{x: make([]float32, l.cfg.BatchSize*chw), y: make([]int32, l.cfg.BatchSize)}
		n, ok := l.Next(b.x, b.y)
		if !ok {
			return out
		}
		b.n = n
		out = append(out, b)
	}
}

func sameBatches(a, b []batch) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].n != b[i].n || !slices.Equal(a[i].x, b[i].x) || !slices.Equal(a[i].y, b[i].y) {
			return false
		}
	}
	return true
}

func TestLoaderNormalisation(t *testing.T) {
	set := &ImageSet{Name: "tiny", C: 2, H: 1, W: 2, Classes: 3,
		Pixels: []uint8{0, 255, 51, 102}, Labels: []int32{2}}
	tests := []struct {
		name      string
		mean, std []float32
		want      []float32
	}{
		{"none", nil, nil, []float32{0, 1, 0.2, 0.4}},
		{"mean and std", []float32{0.5, 0.2}, []float32{0.25, 0.1},
			[]float32{-2, 2, 0, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLoader(t, ImageLoaderConfig{Set: set, BatchSize: 1, Mean: tt.mean, Std: tt.std})
			x, y := make([]float32, 4), make([]int32, 1)
			n, ok := l.Next(x, y)
			if n != 1 || !ok || y[0] != 2 {
				t.Fatalf("Next = %d, %v, label %d; want 1, true, 2", n, ok, y[0])
			}
			for i := range x {
				if math.Abs(float64(x[i]-tt.want[i])) > 1e-6 {
					t.Errorf("x = %v, want %v", x, tt.want)
					break
				}
			}
		})
	}
}

func TestLoaderNaturalOrderAndPadding(t *testing.T) {
	set := indexedSet(7, 1, 2, 2)
	tests := []struct {
		name     string
		cfg      ImageLoaderConfig
		batches  int
		labels   []int32 // all labels read, padding included
		lastN    int
		samples  int
		wantZero bool // padding rows are zero
	}{
		{name: "eval keeps the short batch", cfg: ImageLoaderConfig{BatchSize: 3},
			batches: 3, labels: []int32{0, 1, 2, 3, 4, 5, 6, 0, 0}, lastN: 1, samples: 7, wantZero: true},
		{name: "train drops it", cfg: ImageLoaderConfig{BatchSize: 3, DropLast: true},
			batches: 2, labels: []int32{0, 1, 2, 3, 4, 5}, lastN: 3, samples: 7},
		{name: "rank 1 of 2", cfg: ImageLoaderConfig{BatchSize: 2, Rank: 1, World: 2},
			batches: 2, labels: []int32{1, 3, 5, 0}, lastN: 1, samples: 3, wantZero: true},
		{name: "limit", cfg: ImageLoaderConfig{BatchSize: 2, Limit: 3},
			batches: 2, labels: []int32{0, 1, 2, 0}, lastN: 1, samples: 3, wantZero: true},
		{name: "limit above shard", cfg: ImageLoaderConfig{BatchSize: 4, Limit: 100},
			batches: 2, labels: []int32{0, 1, 2, 3, 4, 5, 6, 0}, lastN: 3, samples: 7, wantZero: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Set = set
			l := newLoader(t, tt.cfg)
			if l.BatchesPerEpoch() != tt.batches || l.Samples() != tt.samples {
				t.Fatalf("%d batches of %d samples, want %d of %d", l.BatchesPerEpoch(), l.Samples(), tt.batches, tt.samples)
			}
			b := tt.cfg.BatchSize
			x, y := make([]float32, b*4), make([]int32, b)
			var labels []int32
			for i := 0; i < tt.batches; i++ {
				// Stale values that Next has to overwrite.
				for j := range x {
					x[j] = float32(math.NaN())
				}
				for j := range y {
					y[j] = -7
				}
				n, ok := l.Next(x, y)
				if !ok {
					t.Fatalf("batch %d: ok = false", i)
				}
				wantN := b
				if i == tt.batches-1 {
					wantN = tt.lastN
				}
				if n != wantN {
					t.Errorf("batch %d: n = %d, want %d", i, n, wantN)
				}
				for j := 0; j < n; j++ {
					img := y[j]
					for k := 0; k < 4; k++ {
						if want := float32(set.Pixels[int(img)*4+k]) / 255; x[j*4+k] != want {
							t.Fatalf("batch %d row %d: x[%d] = %v, want %v", i, j, k, x[j*4+k], want)
						}
					}
				}
				if tt.wantZero {
					for _, v := range x[n*4:] {
						if v != 0 {
							t.Fatalf("batch %d: padding row holds %v, want 0", i, v)
						}
					}
				}
				labels = append(labels, y...)
			}
			if !slices.Equal(labels, tt.labels) {
				t.Errorf("labels %v, want %v", labels, tt.labels)
			}
			if n, ok := l.Next(x, y); ok || n != 0 {
				t.Errorf("after the last batch Next = %d, %v; want 0, false", n, ok)
			}
		})
	}
}

func TestLoaderShuffleShards(t *testing.T) {
	set := indexedSet(50, 1, 1, 1)
	const world, seed, epoch = 3, 11, 4
	order := EpochOrder(50, seed, epoch)
	seen := map[int32]bool{}
	for rank := 0; rank < world; rank++ {
		l := newLoader(t, ImageLoaderConfig{Set: set, BatchSize: 4, Rank: rank, World: world, Seed: seed, Shuffle: true, DropLast: true})
		var labels []int32
		for _, b := range readEpoch(l, epoch) {
			labels = append(labels, b.y[:b.n]...)
		}
		// 16 samples per rank make 4 full batches: the whole shard.
		var want []int32
		for _, i := range Shard(order, rank, world) {
			want = append(want, int32(i))
		}
		if !slices.Equal(labels, want) {
			t.Errorf("rank %d read %v, want its shard %v", rank, labels, want)
		}
		for _, v := range labels {
			if seen[v] {
				t.Errorf("sample %d read by two ranks", v)
			}
			seen[v] = true
		}
	}
}

func TestLoaderAugmentDeterministic(t *testing.T) {
	set := SyntheticImages(40, 3, 8, 8, 4, 1)
	mean, std := set.ChannelStats()
	cfg := ImageLoaderConfig{Set: set, BatchSize: 8, World: 2, Rank: 1, Seed: 3, Shuffle: true, Augment: true,
		Mean: mean, Std: std, DropLast: true}
	a := readEpoch(newLoader(t, cfg), 2)
	b := readEpoch(newLoader(t, cfg), 2)
	if len(a) != 2 || !sameBatches(a, b) {
		t.Fatalf("two loaders with the same config read different epochs (%d and %d batches)", len(a), len(b))
	}
	plain := cfg
	plain.Augment = false
	l := newLoader(t, cfg)
	if sameBatches(readEpoch(l, 2), readEpoch(l, 3)) {
		t.Error("epochs 2 and 3 are identical")
	}
	noShuffle := cfg
	noShuffle.Shuffle = false
	ns := newLoader(t, noShuffle)
	if sameBatches(readEpoch(ns, 0), readEpoch(ns, 1)) {
		t.Error("without shuffling, the augmentation of epochs 0 and 1 is identical")
	}
	if sameBatches(readEpoch(ns, 0), readEpoch(newLoader(t, plain), 0)) {
		t.Error("augmentation changed nothing")
	}
	other := cfg
	other.Seed = 4
	if sameBatches(a, readEpoch(newLoader(t, other), 2)) {
		t.Error("seeds 3 and 4 give the same batches")
	}
}

// TestLoaderAugmentsEachSample checks that every row of a batch is its image cropped and
// flipped as augmentation says for the row's position in the shard.
func TestLoaderAugmentsEachSample(t *testing.T) {
	set := SyntheticImages(12, 3, 8, 8, 4, 1)
	const seed, epoch, rank = 5, 3, 1
	l := newLoader(t, ImageLoaderConfig{Set: set, BatchSize: 4, World: 2, Rank: rank, Seed: seed, Augment: true})
	ref := newLoader(t, ImageLoaderConfig{Set: set, BatchSize: 4})
	chw := 3 * 8 * 8
	want := make([]float32, chw)
	flips := 0
	for bi, b := range readEpoch(l, epoch) {
		for j := 0; j < b.n; j++ {
			pos := bi*4 + j
			idx := rank + 2*pos // natural order, interleaved over 2 ranks
			dy, dx, flip := augmentation(seed, epoch, rank, pos)
			if flip {
				flips++
			}
			ref.cropFlip(want, set.Pixels[idx*chw:(idx+1)*chw], dy, dx, flip)
			if !slices.Equal(b.x[j*chw:(j+1)*chw], want) || b.y[j] != set.Labels[idx] {
				t.Errorf("batch %d row %d is not image %d cropped at (%d,%d) flip=%v", bi, j, idx, dy, dx, flip)
			}
		}
	}
	if flips == 0 || flips == 6 {
		t.Errorf("%d of 6 samples flipped", flips)
	}
}

// TestCropFlip compares the crop-and-flip with a literal construction: pad, cut the window, mirror.
func TestCropFlip(t *testing.T) {
	const c, h, w = 2, 3, 5
	set := indexedSet(1, c, h, w)
	for i := range set.Pixels {
		set.Pixels[i] = uint8(i + 1) // no zeros, so that padding is recognisable
	}
	mean, std := []float32{0.1, 0.2}, []float32{0.5, 0.25}
	l := newLoader(t, ImageLoaderConfig{Set: set, BatchSize: 1, Mean: mean, Std: std, Augment: true})
	norm := func(ch int, p uint8) float32 { return (float32(p)/255 - mean[ch]) / std[ch] }
	for dy := 0; dy <= 2*cropPad; dy++ {
		for dx := 0; dx <= 2*cropPad; dx++ {
			for _, flip := range []bool{false, true} {
				got := make([]float32, c*h*w)
				l.cropFlip(got, set.Pixels, dy, dx, flip)
				for ch := 0; ch < c; ch++ {
					ph, pw := h+2*cropPad, w+2*cropPad
					padded := make([]uint8, ph*pw)
					for y := 0; y < h; y++ {
						for x := 0; x < w; x++ {
							padded[(y+cropPad)*pw+x+cropPad] = set.Pixels[ch*h*w+y*w+x]
						}
					}
					for y := 0; y < h; y++ {
						for x := 0; x < w; x++ {
							win := padded[(y+dy)*pw+x+dx]
							out := x
							if flip {
								out = w - 1 - x
							}
							if want := norm(ch, win); math.Abs(float64(got[ch*h*w+y*w+out]-want)) > 1e-6 {
								t.Fatalf("dy=%d dx=%d flip=%v channel %d: (%d,%d) = %v, want %v",
									dy, dx, flip, ch, y, out, got[ch*h*w+y*w+out], want)
							}
						}
					}
				}
			}
		}
	}
	// A centred, unflipped crop is the image itself.
	got := make([]float32, c*h*w)
	l.cropFlip(got, set.Pixels, cropPad, cropPad, false)
	for i, p := range set.Pixels {
		if want := norm(i/(h*w), p); math.Abs(float64(got[i]-want)) > 1e-6 {
			t.Fatalf("centred crop: x[%d] = %v, want %v", i, got[i], want)
		}
	}
}

func TestAugmentationDistribution(t *testing.T) {
	var dys, dxs [2*cropPad + 1]int
	flips := 0
	const n = 9000
	for pos := 0; pos < n; pos++ {
		dy, dx, flip := augmentation(1, 0, 0, pos)
		dys[dy]++
		dxs[dx]++
		if flip {
			flips++
		}
	}
	if flips < n*45/100 || flips > n*55/100 {
		t.Errorf("%d flips in %d, want about half", flips, n)
	}
	for off := range dys {
		if dys[off] < n/9*8/10 || dxs[off] < n/9*8/10 {
			t.Errorf("offset %d drawn %d (y) and %d (x) times in %d, want about %d", off, dys[off], dxs[off], n, n/9)
		}
	}
}

func TestLoaderSeek(t *testing.T) {
	set := SyntheticImages(45, 3, 6, 6, 5, 2)
	for _, cfg := range []ImageLoaderConfig{
		{Set: set, BatchSize: 4, World: 2, Rank: 1, Seed: 9, Shuffle: true, Augment: true, DropLast: true},
		{Set: set, BatchSize: 4, Seed: 9, Augment: true},
	} {
		l := newLoader(t, cfg)
		all := readEpoch(l, 5)
		if len(all) != l.BatchesPerEpoch() || len(all) < 3 {
			t.Fatalf("read %d batches, BatchesPerEpoch %d", len(all), l.BatchesPerEpoch())
		}
		for i := range all {
			fresh := newLoader(t, cfg)
			fresh.StartEpoch(5)
			fresh.Seek(i)
			rest := readEpochFrom(fresh)
			if !sameBatches(rest, all[i:]) {
				t.Errorf("after Seek(%d) the batches differ from reading through", i)
			}
		}
		l.StartEpoch(5)
		l.Seek(l.BatchesPerEpoch() + 3)
		if got := readEpochFrom(l); len(got) != 0 {
			t.Errorf("Seek past the end left %d batches", len(got))
		}
		l.Seek(-1)
		if !sameBatches(readEpochFrom(l), all) {
			t.Error("Seek(-1) does not restart the epoch")
		}
	}
}

func TestNewImageLoaderErrors(t *testing.T) {
	set := indexedSet(10, 2, 2, 2)
	bad := *set
	bad.Pixels = bad.Pixels[:5]
	tests := []struct {
		name string
		cfg  ImageLoaderConfig
		want string
	}{
		{"no set", ImageLoaderConfig{BatchSize: 1}, "no data set"},
		{"pixels and labels disagree", ImageLoaderConfig{Set: &bad, BatchSize: 1}, "5 pixel bytes"},
		{"zero batch", ImageLoaderConfig{Set: set}, "batch size 0"},
		{"rank too big", ImageLoaderConfig{Set: set, BatchSize: 1, Rank: 2, World: 2}, "rank 2"},
		{"rank with world 0", ImageLoaderConfig{Set: set, BatchSize: 1, Rank: 1}, "rank 1"},
		{"negative world", ImageLoaderConfig{Set: set, BatchSize: 1, World: -1}, "world size -1"},
		{"mean without std", ImageLoaderConfig{Set: set, BatchSize: 1, Mean: []float32{0, 0}}, "together"},
		{"wrong channel count", ImageLoaderConfig{Set: set, BatchSize: 1, Mean: []float32{0}, Std: []float32{1}}, "2 channels"},
		{"zero std", ImageLoaderConfig{Set: set, BatchSize: 1, Mean: []float32{0, 0}, Std: []float32{1, 0}}, "channel 1"},
		{"NaN mean", ImageLoaderConfig{Set: set, BatchSize: 1, Mean: []float32{float32(math.NaN()), 0}, Std: []float32{1, 1}}, "channel 0"},
		{"negative limit", ImageLoaderConfig{Set: set, BatchSize: 1, Limit: -1}, "limit -1"},
		{"no batch", ImageLoaderConfig{Set: set, BatchSize: 6, World: 2, DropLast: true}, "no batch"},
		{"more ranks than samples", ImageLoaderConfig{Set: set, BatchSize: 1, World: 11, Rank: 3}, "no batch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewImageLoader(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewImageLoader = %v, %v; want an error mentioning %q", l, err, tt.want)
			}
		})
	}
}
