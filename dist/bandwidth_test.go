package dist

import (
	"strings"
	"testing"
)

func TestParseBandwidth(t *testing.T) {
	cases := []struct {
		in   string
		want float64
		err  string // substring of the error; "" for none
	}{
		{"", 0, ""},
		{"  ", 0, ""},
		{"100Mbit", 100e6, ""},
		{"1Gbit", 1e9, ""},
		{"10Gbit", 10e9, ""},
		{"2.5Gbps", 2.5e9, ""},
		{"100mbit", 100e6, ""},
		{"100 Mbit/s", 100e6, ""},
		{"500kbit", 500e3, ""},
		{"56Kbps", 56e3, ""},
		{"1Tbit", 1e12, ""},
		{"1Mibit", 1 << 20, ""},
		{"125MB/s", 1e9, ""},
		{"1.25GBps", 10e9, ""},
		{"1000bit", 1000, ""},
		{"100", 0, "missing unit"},
		{"fast", 0, "want a positive number"},
		{"-1Gbit", 0, "want a positive number"},
		{"1..5Gbit", 0, "bad number"},
		{"0Mbit", 0, "must be positive"},
		{"100Mbyte", 0, "unknown unit"},
		{"100M", 0, "unknown unit"},
		{"1Xbit", 0, "unknown unit"},
		{"10bit", 0, "below 1 kbit/s"},
	}
	for _, tc := range cases {
		got, err := ParseBandwidth(tc.in)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("ParseBandwidth(%q): %v", tc.in, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseBandwidth(%q) = %v, %v; want error with %q", tc.in, got, err, tc.err)
		case tc.err == "" && got != tc.want:
			t.Errorf("ParseBandwidth(%q) = %v, want %v", tc.in, got, tc.want)
		}
		if tc.err != "" && err != nil && !strings.Contains(err.Error(), tc.in) {
			t.Errorf("ParseBandwidth(%q): error %q does not quote the input", tc.in, err)
		}
	}
	for _, bps := range []float64{100e6, 1e9, 2.5e9, 10e9, 56e3} {
		if got, err := ParseBandwidth(FormatBandwidth(bps)); err != nil || got != bps {
			t.Errorf("ParseBandwidth(FormatBandwidth(%v) = %q) = %v, %v", bps, FormatBandwidth(bps), got, err)
		}
	}
}
