package datasets

import (
	"math"
	"testing"
)

func TestChannelStats(t *testing.T) {
	tests := []struct {
		name      string
		set       ImageSet
		mean, std []float32
	}{
		{
			name: "two channels",
			// Two 1x2 images: channel 0 holds 0 and 255 (mean 0.5, std 0.5), channel 1 is
			// constant 51 (mean 0.2, std 0).
			set: ImageSet{C: 2, H: 1, W: 2, Pixels: []uint8{
				0, 255, 51, 51,
				255, 0, 51, 51,
			}, Labels: []int32{0, 0}},
			mean: []float32{0.5, 0.2},
			std:  []float32{0.5, 0},
		},
		{
			name: "one channel",
			set:  ImageSet{C: 1, H: 2, W: 1, Pixels: []uint8{0, 0, 0, 255}, Labels: []int32{0, 0}},
			mean: []float32{0.25},
			std:  []float32{float32(math.Sqrt(0.25 - 0.0625))},
		},
		{
			name: "empty",
			set:  ImageSet{C: 3, H: 2, W: 2},
			mean: []float32{0, 0, 0},
			std:  []float32{0, 0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mean, std := tt.set.ChannelStats()
			if len(mean) != tt.set.C || len(std) != tt.set.C {
				t.Fatalf("got %d means and %d stds, want %d", len(mean), len(std), tt.set.C)
			}
			for c := range mean {
				if math.Abs(float64(mean[c]-tt.mean[c])) > 1e-6 || math.Abs(float64(std[c]-tt.std[c])) > 1e-6 {
					t.Errorf("channel %d: mean %v std %v, want %v %v", c, mean[c], std[c], tt.mean[c], tt.std[c])
				}
			}
		})
	}
}
