package datasets

import "math"

// ImageSet holds N images of C x H x W bytes (0..255) and their labels.
type ImageSet struct {
	Name    string // "mnist", "fashion-mnist", "cifar10", "cifar100", "synthetic"
	C, H, W int
	Classes int
	Pixels  []uint8 // N*C*H*W, NCHW (CIFAR's binary layout is already channel-planar)
	Labels  []int32 // N
}

// Len is the number of images in s.
func (s *ImageSet) Len() int { return len(s.Labels) }

// ChannelStats returns the mean and the (population) standard deviation of every channel of the
// pixels scaled to [0,1], computed over the whole set, for use as normalisation constants.
func (s *ImageSet) ChannelStats() (mean, std []float32) {
	mean = make([]float32, s.C)
	std = make([]float32, s.C)
	plane := s.H * s.W
	if plane == 0 || s.C == 0 {
		return mean, std
	}
	// A histogram per channel keeps the sums exact over tens of millions of pixels and makes
	// the pass a single cheap increment per byte.
	hist := make([][256]int64, s.C)
	n := len(s.Pixels) / (s.C * plane)
	for i := 0; i < n; i++ {
		img := s.Pixels[i*s.C*plane : (i+1)*s.C*plane]
		for c := 0; c < s.C; c++ {
			h := &hist[c]
			for _, p := range img[c*plane : (c+1)*plane] {
				h[p]++
			}
		}
	}
	for c := range hist {
		var count, sum, sumSq float64
		for v, k := range hist[c] {
			x := float64(v) / 255
			fk := float64(k)
			count += fk
			sum += fk * x
			sumSq += fk * x * x
		}
		if count == 0 {
			continue
		}
		m := sum / count
		mean[c] = float32(m)
		std[c] = float32(math.Sqrt(math.Max(sumSq/count-m*m, 0)))
	}
	return mean, std
}
