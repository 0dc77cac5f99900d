package sim

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/pipelines"
)

// testConfig is the simulate command's defaults at one scale and one network.
func testConfig() Config {
	return Config{
		Profiles: []string{"resnet50"}, Speed: 1, Settings: pipelines.DefaultSettings(), Workers: []int{8},
		Networks: Networks{Bandwidths: []string{"10Gbit"}, AllReduce: "ring", PerNode: 1,
			IntraBandwidth: "300Gbit", IntraLatency: 10 * time.Microsecond},
		Selection: "cpu", SelectionSpeed: 1, Steps: DefaultSteps, Warmup: DefaultWarmup, Parallel: 1,
		Memory: "2GB", Tolerance: 0.15,
	}
}

// Profiles measured before dimensions, and then shapes, were recorded.
const (
	oldTensor       = `{"name":"w","numel":3,"backward_ms":0.5}`
	shapelessTensor = `{"name":"w","numel":12,"dims":2,"backward_ms":0.5}`
)

// writeProfile writes a profile of model "old" with one tensor, and returns its path.
func writeProfile(t *testing.T, tensor string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "old.json")
	data := `{"model":"old","batch_size":2,"forward_ms":1,"tensors":[` + tensor + `],"update_ms":0.1}`
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// named makes c simulate exactly names.
func named(c *Config, names ...string) { c.Pipelines, c.PipelinesNamed = names, true }

// TestConfigRefusesMistakes: every setting that cannot be simulated is refused, by the
// flag that gives it, before any job runs.
func TestConfigRefusesMistakes(t *testing.T) {
	old, shapeless := writeProfile(t, oldTensor), writeProfile(t, shapelessTensor)
	for _, tc := range []struct {
		name   string
		change func(c *Config)
		want   string
	}{
		{"unknown profile", func(c *Config) { c.Profiles = []string{"resnet9000"} }, "--profile, --speed: profile resnet9000"},
		{"missing profile", func(c *Config) { c.Profiles = []string{filepath.Join(t.TempDir(), "missing.json")} }, "missing.json"},
		{"zero speed", func(c *Config) { c.Speed = 0 }, "speed"},
		{"unknown pipeline", func(c *Config) { named(c, "dense", "fastest") }, "fastest"},
		{"no pipeline", func(c *Config) { named(c) }, "nothing to simulate"},
		{"no workers", func(c *Config) { c.Workers = nil }, "nothing to simulate"},
		{"zero workers", func(c *Config) { c.Workers = []int{8, 0} }, "--workers: 0 is not a worker count"},
		{"bad bandwidth", func(c *Config) { c.Networks.Bandwidths = []string{"fast"} }, "network flags: "},
		{"bad allreduce", func(c *Config) { c.Networks.AllReduce = "butterfly" }, "butterfly"},
		{"bad intra-node link", func(c *Config) { c.Networks.PerNode, c.Networks.IntraBandwidth = 8, "slow" }, "intra-bandwidth"},
		{"unknown selection model", func(c *Config) { c.Selection = "tpu" }, `--selection: unknown selection model "tpu"`},
		{"selection model in capitals", func(c *Config) { c.Selection = "GPU" }, "GPU"},
		{"negative selection speed", func(c *Config) { c.SelectionSpeed = -1 }, "--selection-speed must be positive and finite, got -1"},
		{"infinite selection speed", func(c *Config) { c.SelectionSpeed = math.Inf(1) }, "--selection-speed"},
		{"negative tolerance", func(c *Config) { c.Tolerance = -1 }, "--tolerance must be at least 0, got -1"},
		{"tolerance not a number", func(c *Config) { c.Tolerance = math.NaN() }, "--tolerance"},
		{"bad memory", func(c *Config) { c.Memory = "lots" }, `--memory "lots": want a size such as 2GB or 512MB`},
		{"option none reads", func(c *Config) { named(c, "exdyna", "oktopk"); c.OptionsSet = []string{"selector"} },
			"--selector: none of the pipelines simulated (exdyna, oktopk) reads it"},
		{"option a pipeline refuses", func(c *Config) { c.Settings.SelectRule = "largest"; c.OptionsSet = []string{"select-rule"} }, "largest"},
		{"default pipeline refuses the user's option", func(c *Config) {
			c.Profiles = []string{"resnet50", old}
			c.Settings.SelectRule, c.OptionsSet = "rank", []string{"select-rule"}
		}, "profile old: pipeline ssfusion: ssfusion: the rank rule needs every tensor's dimensions, and tensor w has none"},
		{"named pipeline cannot build", func(c *Config) { c.Profiles = []string{shapeless}; named(c, "dense", "powersgd") },
			"profile old: pipeline powersgd: powersgd: tensor w has 2 dimensions but no known shape"},
		{"default pipeline cannot build with the user's option", func(c *Config) {
			c.Profiles, c.OptionsSet = []string{shapeless}, []string{"powersgd-rank"}
		}, "pipeline powersgd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			tc.change(&c)
			c.LeftOut = func(err error) { t.Errorf("left out: %v", err) }
			s, err := c.Sweep()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("sweep %v, error %v; want an error naming %q", s, err, tc.want)
			}
		})
	}
}

// TestConfigSweep: the sweep carries the settings parsed, and the default pipelines are
// those compared, less those that cannot build on the profiles, each told of.
func TestConfigSweep(t *testing.T) {
	for _, tc := range []struct {
		name     string
		change   func(c *Config)
		memory   int64
		leftOut  []string // pipelines told of as left out
		selector float64  // the selection model's time over the CPU model's
	}{
		{"defaults", func(*Config) {}, 2e9, nil, 1},
		{"no memory limit, faster selection", func(c *Config) { c.Memory, c.SelectionSpeed = "0", 4 }, 0, nil, 0.25},
		{"named pipelines", func(c *Config) { named(c, "dense", "ssfusion"); c.Memory = "512MB" }, 512e6, nil, 1},
		{"a profile without shapes", func(c *Config) { c.Profiles = []string{writeProfile(t, shapelessTensor)} }, 2e9, []string{"powersgd"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			tc.change(&c)
			var leftOut []string
			c.LeftOut = func(err error) {
				for _, name := range pipelines.Compared() {
					if strings.Contains(err.Error(), "pipeline "+name+":") {
						leftOut = append(leftOut, name)
					}
				}
			}
			s, err := c.Sweep()
			if err != nil {
				t.Fatal(err)
			}
			want := c.Pipelines
			if !c.PipelinesNamed {
				want = slices.DeleteFunc(pipelines.Compared(), func(n string) bool { return slices.Contains(tc.leftOut, n) })
			}
			if !slices.Equal(s.Pipelines, want) || !slices.Equal(leftOut, tc.leftOut) {
				t.Errorf("pipelines %v, left out %v; want %v, left out %v", s.Pipelines, leftOut, want, tc.leftOut)
			}
			if s.MemoryLimit != tc.memory || len(s.Profiles) != 1 || len(s.Networks) != 1 || s.Seed != 1 {
				t.Errorf("memory limit %d, %d profiles, %d networks, seed %d; want %d, 1, 1, 1",
					s.MemoryLimit, len(s.Profiles), len(s.Networks), s.Seed, tc.memory)
			}
			cpu := DefaultSelectionModel().Time("topk", 1<<20)
			if got := float64(s.Selection.Time("topk", 1<<20)) / float64(cpu); math.Abs(got-tc.selector) > 1e-6 {
				t.Errorf("selection takes %g of the CPU model's time, want %g", got, tc.selector)
			}
		})
	}
}

// TestConfigSetting: the report's settings name the options, the selection model and
// each network.
func TestConfigSetting(t *testing.T) {
	c := testConfig()
	c.Selection, c.SelectionSpeed = "gpu", 2
	nets, err := c.Networks.Build()
	if err != nil {
		t.Fatal(err)
	}
	got := c.Setting(nets)
	for key, want := range map[string]string{
		"density":        "0.",
		"fusion":         " MiB",
		"selection":      "gpu: ",
		"speed":          "compute x1, selection x2",
		"steps":          "of which",
		"threshold":      "select-rule ",
		"network 10Gbit": nets[0].Model.String(),
	} {
		if !strings.Contains(got[key], want) {
			t.Errorf("setting %s = %q, want it to contain %q", key, got[key], want)
		}
	}
}
