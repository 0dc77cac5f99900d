package dist

import "testing"

// TestSmallThresholdFollowsTheTransport: on a slow link the transport lowers its
// small-message threshold to its segment size, and SmallThreshold says so.
func TestSmallThresholdFollowsTheTransport(t *testing.T) {
	for _, tc := range []struct {
		bps  float64
		want int
	}{{0, 64 << 10}, {10e9, 64 << 10}, {60e6, 16 << 10}, {200e6, 49984}} {
		if got := SmallThreshold(tc.bps); got != tc.want {
			t.Errorf("SmallThreshold(%g) = %d, want %d", tc.bps, got, tc.want)
		}
		o, err := NewOptions(Options{}, WithBandwidth(tc.bps))
		if err != nil {
			t.Fatal(err)
		}
		if o.SmallThreshold != tc.want {
			t.Errorf("at %g bit/s the transport resolves its threshold to %d, SmallThreshold says %d", tc.bps, o.SmallThreshold, tc.want)
		}
	}
}
