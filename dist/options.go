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

	// MaxSegmentSize bounds the payload of one frame; the transports cut larger messages
	// into segments of at most this size.
	MaxSegmentSize = 16 << 20

	// defaultSegment is the frame payload of pipelined algorithms on unshaped links:
	// large enough that per-frame costs vanish at memory speed.
	defaultSegment = 1 << 20
	// defaultSmall is the size up to which AllReduce and Broadcast use their
	// latency-optimal algorithms (recursive doubling, binomial tree).
	defaultSmall = 64 << 10
)

// Option tunes a communicator. Options that change the algorithms (segment size, small
// threshold) must be the same on every rank; a difference is detected and fails the job.
type Option func(*Options)

// Options are the settings of a communicator that the With functions set. A transport
// turns its options into Options with NewOptions, which fills in the defaults.
type Options struct {
	Timeout        time.Duration // 0: DefaultTimeout; < 0: no timeout
	Bandwidth      float64       // bits per second per link direction; 0: unshaped
	Latency        time.Duration // added once to every frame's delivery
	Logger         *slog.Logger
	MaxMessage     int64 // bytes of one rank's AllGatherV contribution
	SegmentSize    int   // frame payload of pipelined algorithms
	SmallThreshold int   // bytes up to which latency-optimal algorithms run; < 0: never
	NoSharedMemory bool  // keep a job of one machine on TCP
	FaultHook      FaultHook
}

// NewOptions applies opts, in order, to base, checks the result and fills in the
// defaults.
func NewOptions(base Options, opts ...Option) (Options, error) {
	o := base
	for _, opt := range opts {
		opt(&o)
	}
	return o, o.resolve()
}

// WithTimeout sets how long a collective may wait on a peer that sends nothing before the
// peer is declared failed (see the package documentation). 0 keeps DefaultTimeout; a
// negative value disables timeouts and heartbeats.
func WithTimeout(d time.Duration) Option { return func(o *Options) { o.Timeout = d } }

// WithBandwidth shapes every link, in each direction, to bitsPerSecond (see
// ParseBandwidth); 0 leaves links unshaped.
func WithBandwidth(bitsPerSecond float64) Option {
	return func(o *Options) { o.Bandwidth = bitsPerSecond }
}

// WithLatency delays the delivery of every frame by d, once per frame.
func WithLatency(d time.Duration) Option { return func(o *Options) { o.Latency = d } }

// WithLogger sets where the communicator reports rejected connections and failures
// (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *Options) { o.Logger = l } }

// WithMaxMessage bounds one rank's contribution to an AllGatherV, in bytes
// (default DefaultMaxMessage).
func WithMaxMessage(bytes int64) Option { return func(o *Options) { o.MaxMessage = bytes } }

// WithSegmentSize sets the frame payload of pipelined algorithms, in bytes. The default
// is 1 MiB on unshaped links and about 2 ms of transmission on shaped ones, so that
// concurrent collectives interleave finely.
func WithSegmentSize(bytes int) Option { return func(o *Options) { o.SegmentSize = bytes } }

// WithSmallThreshold sets the size, in bytes, up to which AllReduce uses recursive
// doubling and Broadcast a binomial tree instead of the bandwidth-optimal ring and chain.
// 0 keeps the default (64 KiB); a negative value always uses the ring and chain. The
// threshold is capped at the segment size.
func WithSmallThreshold(bytes int) Option { return func(o *Options) { o.SmallThreshold = bytes } }

// WithSharedMemory(false) keeps a TCP job on TCP even when all its ranks share a
// machine (see the package documentation); so does SSF_SHM=off in the environment. The
// default is on.
func WithSharedMemory(on bool) Option { return func(o *Options) { o.NoSharedMemory = !on } }

// resolve checks the options and fills in the defaults.
func (o *Options) resolve() error {
	switch {
	case o.Timeout == 0:
		o.Timeout = DefaultTimeout
	case o.Timeout < 0:
		o.Timeout = -1
	}
	if math.IsNaN(o.Bandwidth) || math.IsInf(o.Bandwidth, 0) || o.Bandwidth < 0 {
		return fmt.Errorf("dist: bandwidth %v bit/s: want a finite value >= 0 (0: unshaped)", o.Bandwidth)
	}
	if o.Bandwidth > 0 && o.Bandwidth < 1000 {
		return fmt.Errorf("dist: bandwidth %v bit/s is below 1 kbit/s; did you mean %vMbit?", o.Bandwidth, o.Bandwidth)
	}
	if o.Latency < 0 {
		return fmt.Errorf("dist: negative latency %v", o.Latency)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxMessage == 0 {
		o.MaxMessage = DefaultMaxMessage
	}
	if o.MaxMessage < 0 {
		return fmt.Errorf("dist: negative message limit %d", o.MaxMessage)
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = segmentFor(o.Bandwidth)
	}
	if o.SegmentSize < 64 || o.SegmentSize > MaxSegmentSize {
		return fmt.Errorf("dist: segment size %d outside [64, %d]", o.SegmentSize, MaxSegmentSize)
	}
	o.SegmentSize &^= 63 // whole float32s, and aligned slices
	switch {
	case o.SmallThreshold == 0:
		o.SmallThreshold = defaultSmall
	case o.SmallThreshold < 0:
		o.SmallThreshold = -1
	}
	if o.SmallThreshold > o.SegmentSize {
		o.SmallThreshold = o.SegmentSize
	}
	return nil
}

// HeartbeatEvery is the idle time after which a link sends a heartbeat; 0 disables them.
func (o *Options) HeartbeatEvery() time.Duration {
	if o.Timeout <= 0 {
		return 0
	}
	return o.Timeout / 4
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
