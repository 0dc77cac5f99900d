package netmodel

import (
	"fmt"
	"time"

	"github.com/ssfusion/ssfusion/dist"
)

// A Cable is a link as a user describes it: a rate and a one-way latency. The transport's
// link emulation shapes its links to one (dist.WithBandwidth, dist.WithLatency); Link and
// Network give its cost.
type Cable struct {
	BitsPerSecond float64 // 0: unshaped, a link of no known rate
	Latency       time.Duration
}

// ParseCable reads a cable from a rate as dist.ParseBandwidth reads it ("60Mbit", "10Gbit";
// "" for an unshaped link) and a latency as time.ParseDuration does ("100us"; "" for none).
func ParseCable(bandwidth, latency string) (Cable, error) {
	bps, err := dist.ParseBandwidth(bandwidth)
	if err != nil {
		return Cable{}, err
	}
	c := Cable{BitsPerSecond: bps}
	if latency != "" {
		if c.Latency, err = time.ParseDuration(latency); err != nil || c.Latency < 0 {
			return Cable{}, fmt.Errorf("netmodel: latency %q: want a duration such as 100us or 2ms", latency)
		}
	}
	return c, nil
}

// Shaped reports whether the cable has a rate.
func (c Cable) Shaped() bool { return c.BitsPerSecond > 0 }

// Link is the cable's alpha-beta link (LinkFor); an unshaped cable's fails Network.Check.
func (c Cable) Link() Link { return LinkFor(c.BitsPerSecond, c.Latency) }

// Network is what our transport makes of a flat job over links shaped to c: its
// algorithms (Ours) with the small-message threshold it picks at c's rate.
func (c Cable) Network() Network {
	return Network{Inter: c.Link(), AllReduceAlg: Ours, Small: dist.SmallThreshold(c.BitsPerSecond)}
}
