package keys

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

type inner struct {
	Rate float64 `mapstructure:"rate" usage:"a rate"`
}

type config struct {
	Name    string        `mapstructure:"name" usage:"a name"`
	Count   int           `mapstructure:"count" usage:"a count"`
	Seed    int64         `mapstructure:"seed" usage:"a seed"`
	On      bool          `mapstructure:"on" usage:"a switch"`
	Marks   []float64     `mapstructure:"marks" usage:"some marks"`
	Timeout time.Duration `mapstructure:"timeout" usage:"a wait"`
	inner   `mapstructure:",squash"`
	Hidden  string // no key: no flag
}

func TestFlagsRoundTrip(t *testing.T) {
	d := config{Name: "a", Count: 2, Seed: 3, On: true, Marks: []float64{1}, Timeout: time.Second, inner: inner{Rate: 0.5}}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	AddFlags(fs, d, map[string]string{"name": "overridden"}, "seed")
	if fs.Lookup("seed") != nil || fs.Lookup("Hidden") != nil {
		t.Error("a flag for an excepted key or a field without a key")
	}
	if f := fs.Lookup("name"); f == nil || f.Usage != "overridden" || f.DefValue != "a" {
		t.Errorf("name flag %+v", f)
	}
	if f := fs.Lookup("rate"); f == nil || f.Usage != "a rate" || f.DefValue != "0.5" {
		t.Errorf("the squashed struct's flag: %+v", f)
	}
	if err := fs.Parse(strings.Fields("--name b --count 5 --on=false --marks 2,3 --timeout 1m --rate 0.25")); err != nil {
		t.Fatal(err)
	}
	got := d
	if err := FromFlags(fs, &got); err != nil {
		t.Fatal(err)
	}
	if got.Name != "b" || got.Count != 5 || got.Seed != 3 || got.On || len(got.Marks) != 2 || got.Marks[1] != 3 || got.Timeout != time.Minute || got.Rate != 0.25 {
		t.Errorf("read back %+v", got)
	}
}

func TestAddFlagsRefusesUnknownTypes(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "odd") {
			t.Errorf("panic %v, want one naming the key", r)
		}
	}()
	AddFlags(pflag.NewFlagSet("t", pflag.ContinueOnError), struct {
		Odd complex64 `mapstructure:"odd"`
	}{}, nil)
}
