package dist

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseBandwidth reads a link rate and returns it in bits per second; "" means unshaped
// and returns 0. A rate is a positive number and a unit, with or without a space:
//
//	bits per second:  bit, bits, bit/s, bps, b/s      100Mbit, 1Gbit, 10Gbit, 2.5Gbps
//	bytes per second: B/s, Bps, byte/s                125MB/s, 1.25GBps
//
// with an optional prefix k, M, G, T (powers of 1000, in any case) or Ki, Mi, Gi, Ti
// (powers of 1024). As in networking and unlike tc, bps means bits per second; a capital
// B means bytes.
func ParseBandwidth(s string) (float64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, nil
	}
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		return 0, fmt.Errorf("dist: bandwidth %q: missing unit (want e.g. 100Mbit, 1Gbit, 2.5Gbps, 125MB/s)", s)
	}
	if i == 0 {
		return 0, fmt.Errorf("dist: bandwidth %q: want a positive number then a unit, e.g. 100Mbit", s)
	}
	v, err := strconv.ParseFloat(t[:i], 64)
	if err != nil {
		return 0, fmt.Errorf("dist: bandwidth %q: bad number %q", s, t[:i])
	}
	unit := strings.TrimSpace(t[i:])
	mult := 1.0
	if len(unit) > 1 {
		if p := strings.IndexByte("kmgt", lower(unit[0])); p >= 0 {
			unit = unit[1:]
			if len(unit) > 1 && unit[0] == 'i' {
				mult = math.Pow(1024, float64(p+1))
				unit = unit[1:]
			} else {
				mult = math.Pow(1000, float64(p+1))
			}
		}
	}
	switch {
	case unit == "bps" || unit == "b/s" || foldAny(unit, "bit", "bits", "bit/s", "bits/s"):
	case unit == "Bps" || unit == "B/s" || foldAny(unit, "byte/s", "bytes/s"):
		mult *= 8
	default:
		return 0, fmt.Errorf("dist: bandwidth %q: unknown unit %q (want bit, bps or B/s, with k, M, G, T or Ki, Mi, Gi, Ti)", s, strings.TrimSpace(t[i:]))
	}
	bps := v * mult
	if bps == 0 {
		return 0, fmt.Errorf("dist: bandwidth %q: must be positive (leave it empty for unshaped links)", s)
	}
	if bps < 1000 {
		return 0, fmt.Errorf("dist: bandwidth %q: below 1 kbit/s", s)
	}
	return bps, nil
}

// FormatBandwidth writes bits per second the way ParseBandwidth reads them ("" for 0).
func FormatBandwidth(bps float64) string {
	if bps <= 0 {
		return ""
	}
	for _, u := range []struct {
		div  float64
		name string
	}{{1e12, "Tbit"}, {1e9, "Gbit"}, {1e6, "Mbit"}, {1e3, "kbit"}} {
		if bps >= u.div {
			return strconv.FormatFloat(bps/u.div, 'g', 6, 64) + u.name
		}
	}
	return strconv.FormatFloat(bps, 'g', 6, 64) + "bit"
}

func lower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

func foldAny(s string, options ...string) bool {
	for _, o := range options {
		if strings.EqualFold(s, o) {
			return true
		}
	}
	return false
}
