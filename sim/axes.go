package sim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ssfusion/ssfusion/dist"
)

// Constants are the hardware constants a map varies: everything about a cluster that the
// simulator cannot measure here. A point of a map is the sweep's base Constants with one
// or two of them changed.
type Constants struct {
	Workers       int
	BitsPerSecond float64       // the link between workers
	Latency       time.Duration // start-up of every message on that link (alpha)
	// SelectCallNS and SelectElementNS are the selection model's top-k line (per call and
	// per element, see Linear); every other kind of selection scales with them, so that a
	// map's point says "selection this dear", whatever the model's shape.
	SelectCallNS    float64
	SelectElementNS float64
}

// An Axis is one constant of Constants and the values a map gives it, in increasing
// order.
type Axis struct {
	Name   string // one of AxisNames
	Values []float64
}

// axisKinds says, for each constant a map can vary, how its values are read, written and
// set. Units are those of Constants: bits/s, nanoseconds, workers.
var axisKinds = map[string]struct {
	parse  func(string) (float64, error)
	format func(float64) string
	set    func(*Constants, float64)
	get    func(Constants) float64
	label  string // an axis title
}{
	"workers": {parseWorkers, func(v float64) string { return strconv.Itoa(int(v)) },
		func(c *Constants, v float64) { c.Workers = int(v) }, func(c Constants) float64 { return float64(c.Workers) }, "workers"},
	"bandwidth": {parseBandwidth, FormatBandwidth,
		func(c *Constants, v float64) { c.BitsPerSecond = v }, func(c Constants) float64 { return c.BitsPerSecond }, "link bandwidth (bit/s)"},
	"latency": {parseDurationNS, formatNS,
		func(c *Constants, v float64) { c.Latency = time.Duration(math.Round(v)) }, func(c Constants) float64 { return float64(c.Latency) },
		"start-up per message (alpha)"},
	"select-call": {parseDurationNS, formatNS,
		func(c *Constants, v float64) { c.SelectCallNS = v }, func(c Constants) float64 { return c.SelectCallNS },
		"selection cost per call (top-k)"},
	"select-element": {parseNSPerElement, func(v float64) string { return sig3(v) + "ns" },
		func(c *Constants, v float64) { c.SelectElementNS = v }, func(c Constants) float64 { return c.SelectElementNS },
		"selection cost per element (top-k, ns)"},
}

// AxisNames lists the constants a map can vary.
func AxisNames() []string {
	return []string{"workers", "bandwidth", "latency", "select-call", "select-element"}
}

// ParseAxis reads an axis as the --vary flag gives it: NAME=V1,V2,... or NAME=LO..HI/N,
// N values spaced evenly on a log scale from LO to HI (worker counts rounded, repeats
// dropped). Values take the constant's unit: 10Gbit, 50us, 8, 1.4ns.
func ParseAxis(s string) (Axis, error) {
	name, spec, ok := strings.Cut(s, "=")
	kind, known := axisKinds[name]
	if !ok || !known {
		return Axis{}, fmt.Errorf("%q: want NAME=V1,V2,... or NAME=LO..HI/N, NAME one of %s", s, strings.Join(AxisNames(), ", "))
	}
	var values []float64
	if lo, rest, isRange := strings.Cut(spec, ".."); isRange {
		hi, n, _ := strings.Cut(rest, "/")
		count, err := strconv.Atoi(n)
		if err != nil || count < 2 {
			return Axis{}, fmt.Errorf("%s: range %q needs /N, N at least 2, after its ends (such as 1Gbit..100Gbit/5)", name, spec)
		}
		from, err := kind.parse(lo)
		to := from
		if err == nil {
			to, err = kind.parse(hi)
		}
		if err != nil {
			return Axis{}, fmt.Errorf("%s: %w", name, err)
		}
		if !(to > from) {
			return Axis{}, fmt.Errorf("%s: range %q must rise", name, spec)
		}
		values = logSpaced(from, to, count)
	} else {
		for _, v := range strings.Split(spec, ",") {
			x, err := kind.parse(strings.TrimSpace(v))
			if err != nil {
				return Axis{}, fmt.Errorf("%s: %w", name, err)
			}
			values = append(values, x)
		}
	}
	if name == "workers" {
		for i, v := range values {
			values[i] = math.Round(v)
		}
	}
	slices.Sort(values)
	values = slices.Compact(values)
	if len(values) < 2 {
		return Axis{}, fmt.Errorf("%s: a map needs at least two values, got %q", name, spec)
	}
	return Axis{Name: name, Values: values}, nil
}

// logSpaced returns n values from lo to hi, evenly spaced on a log scale.
func logSpaced(lo, hi float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		v := lo * math.Pow(hi/lo, float64(i)/float64(n-1))
		// Nine significant digits: 1Gbit comes out as 1e9, not 999999999.9999999.
		out[i], _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 9, 64), 64)
	}
	out[n-1] = hi
	return out
}

// Format writes v as the axis's values are written.
func (a Axis) Format(v float64) string { return axisKinds[a.Name].format(v) }

// Label is the axis's title.
func (a Axis) Label() string { return axisKinds[a.Name].label }

// Of returns c's value of the axis's constant.
func (a Axis) Of(c Constants) float64 { return axisKinds[a.Name].get(c) }

// of is Of, or 0 for the missing axis of a map of one constant.
func (a Axis) of(c Constants) float64 {
	if a.Name == "" {
		return 0
	}
	return a.Of(c)
}

// set returns c with the axis's constant at v.
func (a Axis) set(c Constants, v float64) Constants {
	axisKinds[a.Name].set(&c, v)
	return c
}

func parseWorkers(s string) (float64, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%q is not a worker count", s)
	}
	return float64(n), nil
}

func parseBandwidth(s string) (float64, error) {
	bps, err := dist.ParseBandwidth(s)
	if err != nil || !(bps > 0) {
		return 0, fmt.Errorf("%q: want a positive rate such as 10Gbit or 400Mbit", s)
	}
	return bps, nil
}

func parseDurationNS(s string) (float64, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: want a positive duration such as 50us or 1ms", s)
	}
	return float64(d), nil
}

func parseNSPerElement(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "ns"), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q: want a positive time per element in nanoseconds, such as 1.4ns", s)
	}
	return v, nil
}

// FormatBandwidth writes a rate in bits per second as --bandwidth takes it: 10Gbit,
// 400Mbit, 1.5Gbit.
func FormatBandwidth(bps float64) string {
	switch {
	case bps >= 1e9:
		return sig3(bps/1e9) + "Gbit"
	case bps >= 1e6:
		return sig3(bps/1e6) + "Mbit"
	}
	return sig3(bps/1e3) + "Kbit"
}

// sig3 writes v rounded to three significant digits, without an exponent.
func sig3(v float64) string {
	if v == 0 {
		return "0"
	}
	scale := math.Pow(10, 2-math.Floor(math.Log10(math.Abs(v))))
	return strconv.FormatFloat(math.Round(v*scale)/scale, 'f', -1, 64)
}

// formatNS writes nanoseconds as a duration, rounded to 3 significant digits.
func formatNS(ns float64) string {
	d := time.Duration(math.Round(ns))
	switch {
	case d >= time.Millisecond:
		return sig3(ns/1e6) + "ms"
	case d >= time.Microsecond:
		return sig3(ns/1e3) + "us"
	}
	return sig3(ns) + "ns"
}

// log reports whether the axis is drawn on a log scale: every constant a map varies spans
// decades.
func (a Axis) log() bool { return a.Name != "" }

// labelOr is the axis's title, or none for the missing axis of a map of one constant.
func (a Axis) labelOr(none string) string {
	if a.Name == "" {
		return none
	}
	return a.Label()
}

// formatOr is Format, or a writer of nothing for the missing axis.
func (a Axis) formatOr() func(float64) string {
	if a.Name == "" {
		return func(float64) string { return "" }
	}
	return a.Format
}

// covers reports whether v lies within the axis's values.
func (a Axis) covers(v float64) bool {
	return len(a.Values) > 0 && v >= a.Values[0] && v <= a.Values[len(a.Values)-1]
}

// FormatDuration writes d as a map's axes write times: 37us, 450ns, 1.5ms.
func FormatDuration(d time.Duration) string { return formatNS(float64(d)) }
