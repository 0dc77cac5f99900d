package pipelines

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/ssfusion/ssfusion/pipeline"
)

func stub(name string, reads ...string) Spec {
	return Spec{Name: name, Description: "a test's", Reads: reads,
		New: func(b Build) (pipeline.Pipeline, error) { return pipeline.NewLocal(b.Tensors), nil }}
}

// TestRegisterRefusesMistakes: an empty, malformed or duplicate name, a missing
// constructor and an unknown key each panic at registration.
func TestRegisterRefusesMistakes(t *testing.T) {
	Register(stub("registered"))
	defer Unregister("registered")
	noNew := stub("nonew")
	noNew.New = nil
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{"empty name", stub(""), "lower case"},
		{"upper case", stub("Dense"), "lower case"},
		{"comma", stub("a,b"), "lower case"},
		{"no constructor", noNew, "constructor"},
		{"unknown key", stub("badkey", "densty"), `"densty"`},
		{"duplicate", stub("registered"), "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), tc.want) {
					t.Errorf("panic %v, want one mentioning %s", r, tc.want)
				}
			}()
			Register(tc.spec)
		})
	}
}

// TestCheck: an unknown pipeline is named with the known ones, unread keys away from their
// defaults are refused by name, read ones pass, and the spec's own Check runs.
func TestCheck(t *testing.T) {
	Register(stub("reader", "density", "selector"))
	defer Unregister("reader")
	picky := stub("picky", "density")
	picky.Check = func(s Settings) error {
		if s.Density > 0.5 {
			return errPicky
		}
		return nil
	}
	Register(picky)
	defer Unregister("picky")
	for _, tc := range []struct {
		name string
		edit func(*Settings)
		want []string // nil: accepted
	}{
		{"defaults", func(s *Settings) {}, nil},
		{"a key it reads", func(s *Settings) { s.Density, s.Selector = 0.2, "randomk" }, nil},
		{"unknown pipeline", func(s *Settings) { s.Pipeline = "fastest" }, []string{`"fastest"`, "reader"}},
		{"a key it does not read", func(s *Settings) { s.PowerSGDRank = 4 }, []string{"powersgd-rank is 4", "pipeline reader does not read powersgd-rank"}},
		{"two keys", func(s *Settings) { s.FusionMB, s.SelectRule = 8, "rank" }, []string{"fusion-mb", "select-rule"}},
		{"out of range", func(s *Settings) { s.Density = 2 }, []string{"density must be in (0, 1]"}},
		{"its own check", func(s *Settings) { s.Pipeline, s.Density = "picky", 0.9 }, []string{"too dense"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := DefaultSettings()
			s.Pipeline = "reader"
			tc.edit(&s)
			err := Check(s)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to say %q", err, w)
				}
			}
		})
	}
}

var errPicky = errors.New("too dense")

// TestFor: a pipeline takes the keys it reads from shared settings; the rest return to
// their defaults, but for the keys kept.
func TestFor(t *testing.T) {
	Register(stub("reader", "density"))
	defer Unregister("reader")
	shared := DefaultSettings()
	shared.Density, shared.Selector, shared.FusionMB = 0.05, "dgc", 8
	got, err := shared.For("reader", "fusion-mb")
	if err != nil {
		t.Fatal(err)
	}
	if got.Pipeline != "reader" || got.Density != 0.05 || got.Selector != "topk" || got.FusionMB != 8 {
		t.Errorf("For: %+v", got)
	}
	if _, err := shared.For("fastest"); err == nil {
		t.Error("For an unknown pipeline: no error")
	}
}

// TestFlagsRoundTrip: every key has a flag with its default, and FromFlags reads the
// flags back into Settings.
func TestFlagsRoundTrip(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	AddFlags(fs, DefaultSettings())
	for _, key := range append(Keys(), "pipeline") {
		if fs.Lookup(key) == nil {
			t.Errorf("no flag for %s", key)
		}
	}
	if err := fs.Parse([]string{"--density=0.2", "--select-rule=rank", "--error-feedback=false", "--powersgd-rank=3", "--pipeline=exdyna"}); err != nil {
		t.Fatal(err)
	}
	got, err := FromFlags(fs, DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultSettings()
	want.Density, want.SelectRule, want.ErrorFeedback, want.PowerSGDRank, want.Pipeline = 0.2, "rank", false, 3, "exdyna"
	if got != want {
		t.Errorf("FromFlags: %+v, want %+v", got, want)
	}
	opts := pflag.NewFlagSet("t", pflag.ContinueOnError)
	AddOptionFlags(opts, DefaultSettings(), "select-ns")
	if opts.Lookup("pipeline") != nil || opts.Lookup("select-ns") != nil || opts.Lookup("density") == nil {
		t.Error("AddOptionFlags: want every key but pipeline and the excepted ones")
	}
}
