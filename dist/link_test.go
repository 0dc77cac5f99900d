package dist

import (
	"math"
	"testing"
	"time"
)

// TestLinkRate measures the emulated cable: 2.5 MB broadcast over one 100 Mbit/s link
// must take the time the bytes on the wire (headers included) need at that rate, within
// 10%. A noisy machine gets three tries.
func TestLinkRate(t *testing.T) {
	const bps, size = 100e6, 2_500_000
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			comms := be.start(t, 2, WithBandwidth(bps))
			var dev float64
			for try := range 3 {
				noErrors(t, runRanks(t, comms, 10*time.Second, func(r int, c Communicator) error { return c.Barrier() }))
				before := comms[1].Stats()
				start := time.Now()
				noErrors(t, runRanks(t, comms, 10*time.Second, func(r int, c Communicator) error {
					return c.Broadcast(make([]byte, size), 0)
				}))
				elapsed := time.Since(start)
				wire := comms[1].Stats().Sub(before).BytesRecv
				want := time.Duration(float64(wire) * 8 / bps * float64(time.Second))
				dev = (elapsed.Seconds() - want.Seconds()) / want.Seconds()
				t.Logf("try %d: %d bytes in %v, %v expected at %s: %+.1f%%", try+1, wire, elapsed.Round(time.Millisecond),
					want.Round(time.Millisecond), FormatBandwidth(bps), 100*dev)
				if math.Abs(dev) <= 0.10 {
					return
				}
			}
			t.Errorf("achieved rate off by %+.1f%% (limit 10%%)", 100*dev)
		})
	}
}

// TestLinkLatency: a frame arrives no sooner than the latency after it was sent, and
// frames in flight overlap: 40 frames take about one latency, not 40.
func TestLinkLatency(t *testing.T) {
	const latency = 30 * time.Millisecond
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			comms := be.start(t, 2, WithLatency(latency), WithSegmentSize(64<<10))
			start := time.Now()
			noErrors(t, runRanks(t, comms, 10*time.Second, func(r int, c Communicator) error { return c.Barrier() }))
			if d := time.Since(start); d < latency {
				t.Errorf("barrier over a %v link took %v", latency, d)
			}
			start = time.Now()
			noErrors(t, runRanks(t, comms, 10*time.Second, func(r int, c Communicator) error {
				return c.Broadcast(make([]byte, 40*64<<10), 0)
			}))
			d := time.Since(start)
			t.Logf("40 frames over a %v link: %v", latency, d.Round(time.Millisecond))
			if d < latency || d > 10*latency {
				t.Errorf("40 pipelined frames took %v, want about %v (not 40 times it)", d, latency)
			}
		})
	}
}
