package dist

import (
	"fmt"
	"log/slog"
	"math"
	"time"
)

const (
	// DefaultTimeout is how long a collective waits on a silent peer before it fails,
	// when no timeout is configured. It must exceed the longest time one rank can lag
	// behind another (an evaluation that only rank 0 runs, a checkpoint write).
	DefaultTimeout = 2 * time.Minute
	// DefaultDialTimeout bounds the rendezvous of a TCP job.
	DefaultDialTimeout = time.Minute
	// DefaultMaxMessage bounds one rank's contribution to an AllGatherV, and so what a
	// peer can make this rank allocate.
	DefaultMaxMessage = 1 << 30

	// maxFrame bounds the payload of one frame; algorithms cut larger messages into
	// segments.
	maxFrame = 16 << 20
	// defaultSegment is the frame payload of pipelined algorithms on unshaped links:
	// large enough that per-frame costs vanish at memory speed.
	defaultSegment = 1 << 20
	// defaultSmall is the size up to which AllReduce and Broadcast use their
	// latency-optimal algorithms (recursive doubling, binomial tree).
	defaultSmall = 64 << 10
	// closeLinger bounds how long Close waits for peers to acknowledge its goodbye.
	closeLinger = 2 * time.Second
	// abortGrace bounds how long a failing rank tries to tell a peer why.
	abortGrace = 500 * time.Millisecond
)

// Option tunes a communicator. Options that change the algorithms (segment size, small
// threshold) must be the same on every rank; a difference is detected and fails the job.
type Option func(*options)

type options struct {
	timeout    time.Duration // 0: default; < 0: no timeout
	bandwidth  float64       // bits per second per link direction; 0: unshaped
	latency    time.Duration
	logger     *slog.Logger
	maxMessage int64
	segment    int
	small      int // 0: default; < 0: never
	noShm      bool
	fault      faultHook // tests only (withFaultHook); nil: no fault points
}

// WithTimeout sets how long a collective may wait on a peer that sends nothing before the
// peer is declared failed (see the package documentation). 0 keeps DefaultTimeout; a
// negative value disables timeouts and heartbeats.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithBandwidth shapes every link, in each direction, to bitsPerSecond (see
// ParseBandwidth); 0 leaves links unshaped.
func WithBandwidth(bitsPerSecond float64) Option {
	return func(o *options) { o.bandwidth = bitsPerSecond }
}

// WithLatency delays the delivery of every frame by d, once per frame.
func WithLatency(d time.Duration) Option { return func(o *options) { o.latency = d } }

// WithLogger sets where the communicator reports rejected connections and failures
// (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithMaxMessage bounds one rank's contribution to an AllGatherV, in bytes
// (default DefaultMaxMessage).
func WithMaxMessage(bytes int64) Option { return func(o *options) { o.maxMessage = bytes } }

// WithSegmentSize sets the frame payload of pipelined algorithms, in bytes. The default
// is 1 MiB on unshaped links and about 2 ms of transmission on shaped ones, so that
// concurrent collectives interleave finely.
func WithSegmentSize(bytes int) Option { return func(o *options) { o.segment = bytes } }

// WithSmallThreshold sets the size, in bytes, up to which AllReduce uses recursive
// doubling and Broadcast a binomial tree instead of the bandwidth-optimal ring and chain.
// 0 keeps the default (64 KiB); a negative value always uses the ring and chain. The
// threshold is capped at the segment size.
func WithSmallThreshold(bytes int) Option { return func(o *options) { o.small = bytes } }

// WithSharedMemory(false) keeps a TCP job on TCP even when all its ranks share a
// machine (see the package documentation); so does SSF_SHM=off in the environment. The
// default is on.
func WithSharedMemory(on bool) Option { return func(o *options) { o.noShm = !on } }

// resolve checks the options and fills in the defaults.
func (o *options) resolve() error {
	switch {
	case o.timeout == 0:
		o.timeout = DefaultTimeout
	case o.timeout < 0:
		o.timeout = -1
	}
	if math.IsNaN(o.bandwidth) || math.IsInf(o.bandwidth, 0) || o.bandwidth < 0 {
		return fmt.Errorf("dist: bandwidth %v bit/s: want a finite value >= 0 (0: unshaped)", o.bandwidth)
	}
	if o.bandwidth > 0 && o.bandwidth < 1000 {
		return fmt.Errorf("dist: bandwidth %v bit/s is below 1 kbit/s; did you mean %vMbit?", o.bandwidth, o.bandwidth)
	}
	if o.latency < 0 {
		return fmt.Errorf("dist: negative latency %v", o.latency)
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	if o.maxMessage == 0 {
		o.maxMessage = DefaultMaxMessage
	}
	if o.maxMessage < 0 {
		return fmt.Errorf("dist: negative message limit %d", o.maxMessage)
	}
	if o.segment == 0 {
		o.segment = segmentFor(o.bandwidth)
	}
	if o.segment < 64 || o.segment > maxFrame {
		return fmt.Errorf("dist: segment size %d outside [64, %d]", o.segment, maxFrame)
	}
	o.segment &^= 63 // whole float32s, and aligned slices
	switch {
	case o.small == 0:
		o.small = defaultSmall
	case o.small < 0:
		o.small = -1
	}
	if o.small > o.segment {
		o.small = o.segment
	}
	return nil
}

// heartbeatEvery is the idle time after which a link sends a heartbeat; 0 disables them.
func (o *options) heartbeatEvery() time.Duration {
	if o.timeout <= 0 {
		return 0
	}
	return o.timeout / 4
}

// segmentFor is the default segment size on links shaped to bitsPerSecond (0: unshaped):
// about 2 ms of transmission per frame, so that a frame of another collective waits at most
// that long behind one of ours.
func segmentFor(bitsPerSecond float64) int {
	if bitsPerSecond <= 0 {
		return defaultSegment
	}
	return int(math.Min(defaultSegment, math.Max(16<<10, bitsPerSecond/8*0.002)))
}

// SmallThreshold is the small-message threshold the transport uses by default on links
// shaped to bitsPerSecond (0: unshaped): its default, lowered to the segment size.
func SmallThreshold(bitsPerSecond float64) int {
	return min(defaultSmall, segmentFor(bitsPerSecond)&^63)
}
