package tcp

import (
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/disttest"
)

// broadcastTime times a broadcast of size bytes from rank 0 of a 2-rank job, after a
// barrier, and returns it with the data bytes that crossed the wire, headers included.
func broadcastTime(t testing.TB, comms []dist.Communicator, size int) (time.Duration, int64) {
	t.Helper()
	disttest.NoErrors(t, disttest.RunRanks(t, comms, 10*time.Second, func(r int, c dist.Communicator) error { return c.Barrier() }))
	before := comms[1].Stats()
	start := time.Now()
	disttest.NoErrors(t, disttest.RunRanks(t, comms, 10*time.Second, func(r int, c dist.Communicator) error {
		return c.Broadcast(make([]byte, size), 0)
	}))
	return time.Since(start), comms[1].Stats().Sub(before).BytesRecv
}

// TestLinkRate: a 2.5 MB broadcast over one 100 Mbit/s link takes the time its bytes on
// the wire need at that rate. The pacer never runs ahead of the rate by more than its
// burst, so finishing 10% early fails at once; a busy machine can only make the transfer
// slower, so up to twice the time passes, and a try that takes longer is repeated. A link
// shaped three times too fast or too slow fails. BenchmarkLinkRate measures the accuracy.
func TestLinkRate(t *testing.T) {
	const bps, size, tries = 100e6, 2_500_000, 3
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			comms := be.start(t, 2, dist.WithBandwidth(bps))
			var dev float64
			for try := range tries {
				elapsed, wire := broadcastTime(t, comms, size)
				want := time.Duration(float64(wire) * 8 / bps * float64(time.Second))
				dev = (elapsed.Seconds() - want.Seconds()) / want.Seconds()
				t.Logf("try %d: %d bytes in %v, %v expected at %s: %+.1f%%", try+1, wire, elapsed.Round(time.Millisecond),
					want.Round(time.Millisecond), dist.FormatBandwidth(bps), 100*dev)
				if dev < -0.10 {
					t.Fatalf("the link carried %d bytes in %v, faster than %s allows (%v)", wire, elapsed, dist.FormatBandwidth(bps), want)
				}
				if dev <= 1 {
					return
				}
			}
			t.Errorf("achieved rate off by %+.1f%% in each of %d tries (limit +100%%)", 100*dev, tries)
		})
	}
}

// TestLinkLatency: a frame arrives no sooner than the latency after it was sent, and
// frames in flight overlap: 40 frames take about one latency, not 40. Both bounds on the
// late side allow a busy machine 1.5 latencies of delay, and a try that takes longer is
// repeated; a latency paid three times, or per frame, fails.
func TestLinkLatency(t *testing.T) {
	const latency, tries = 30 * time.Millisecond, 3
	const limit = latency * 5 / 2
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			comms := be.start(t, 2, dist.WithLatency(latency), dist.WithSegmentSize(64<<10))
			var barrier, frames time.Duration
			for try := range tries {
				start := time.Now()
				disttest.NoErrors(t, disttest.RunRanks(t, comms, 10*time.Second, func(r int, c dist.Communicator) error { return c.Barrier() }))
				barrier = time.Since(start)
				start = time.Now()
				disttest.NoErrors(t, disttest.RunRanks(t, comms, 10*time.Second, func(r int, c dist.Communicator) error {
					return c.Broadcast(make([]byte, 40*64<<10), 0)
				}))
				frames = time.Since(start)
				t.Logf("try %d over a %v link: barrier %v, 40 frames %v", try+1, latency,
					barrier.Round(time.Millisecond), frames.Round(time.Millisecond))
				if barrier < latency || frames < latency {
					t.Fatalf("barrier %v, 40 frames %v: sooner than the latency %v", barrier, frames, latency)
				}
				if barrier < limit && frames < limit {
					return
				}
			}
			t.Errorf("barrier %v, 40 pipelined frames %v in each of %d tries: want about %v (under %v), not a multiple of it",
				barrier, frames, tries, latency, limit)
		})
	}
}

// BenchmarkLinkRate reports how far a shaped link's achieved rate is from the one it was
// shaped to; an idle machine shows the pacer's accuracy, which TestLinkRate checks only
// loosely.
func BenchmarkLinkRate(b *testing.B) {
	const bps, size = 100e6, 2_500_000
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			comms := be.start(b, 2, dist.WithBandwidth(bps))
			var elapsed time.Duration
			var wire int64
			for b.Loop() {
				d, w := broadcastTime(b, comms, size)
				elapsed += d
				wire += w
			}
			want := float64(wire) * 8 / bps
			b.ReportMetric(100*(elapsed.Seconds()-want)/want, "%slower")
			b.ReportMetric(float64(wire)*8/elapsed.Seconds()/1e6, "Mbit/s")
		})
	}
}
