package profile

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestArchitectureParams(t *testing.T) {
	tests := []struct {
		name    string
		params  int // published count
		tensors int // len(list(model.parameters()))
		// Tensors that must be there, by the framework's name, with their dimensions.
		dims map[string]int
	}{
		{"resnet50", 25_557_032, 161, map[string]int{"conv1.weight": 4, "layer1.0.conv1.weight": 4, "layer1.0.downsample.1.bias": 1, "layer4.2.bn3.weight": 1, "fc.weight": 2, "fc.bias": 1}},
		{"resnet152", 60_192_808, 467, map[string]int{"layer3.35.conv3.weight": 4, "layer4.0.downsample.0.weight": 4}},
		{"vgg16", 138_357_544, 32, map[string]int{"features.0.weight": 4, "features.28.bias": 1, "classifier.0.weight": 2, "classifier.6.bias": 1}},
		{"bert-base", 109_482_240, 199, map[string]int{"embeddings.word_embeddings.weight": 2, "encoder.layer.0.attention.self.query.weight": 2, "encoder.layer.11.output.LayerNorm.bias": 1, "encoder.layer.11.output.LayerNorm.weight": 1, "pooler.dense.weight": 2}},
		{"bert-large", 335_141_888, 391, map[string]int{"encoder.layer.23.intermediate.dense.weight": 2}},
		{"gpt2", 124_439_808, 148, map[string]int{"wte.weight": 2, "wpe.weight": 2, "h.0.attn.c_attn.weight": 2, "h.11.mlp.c_proj.bias": 1, "ln_f.weight": 1}},
	}
	if got, want := len(tests), len(Architectures()); got != want {
		t.Errorf("testing %d architectures, but there are %d", got, want)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			arch, err := Architecture(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			if got := ArchParams(arch); got != tt.params {
				t.Errorf("params = %d, want %d", got, tt.params)
			}
			if len(arch) != tt.tensors {
				t.Errorf("%d tensors, want %d", len(arch), tt.tensors)
			}
			if _, err := checkArch(arch); err != nil {
				t.Error(err)
			}
			for name, dims := range tt.dims {
				i := slices.IndexFunc(arch, func(l Layer) bool { return l.Name == name })
				switch {
				case i < 0:
					t.Errorf("no tensor %q", name)
				case arch[i].Dims != dims:
					t.Errorf("%s has %d dimensions, want %d", name, arch[i].Dims, dims)
				}
			}
			for _, l := range arch {
				if l.Dims == 0 {
					t.Errorf("%s: dimensions unknown", l.Name)
				}
			}
		})
	}
}

// The CNNs' FLOPs must match the published multiply-accumulate counts (torchvision's
// "GFLOPS", which count MACs): 2 FLOPs per MAC, plus a little for BatchNorm and biases.
func TestArchitectureFLOPs(t *testing.T) {
	for _, tt := range []struct {
		name  string
		gmacs float64
	}{
		{"resnet50", 4.09},
		{"resnet152", 11.51},
		{"vgg16", 15.47},
	} {
		arch, err := Architecture(tt.name)
		if err != nil {
			t.Fatal(err)
		}
		want := 2 * tt.gmacs * 1e9
		if got := ArchFLOPs(arch); math.Abs(got-want) > 0.02*want {
			t.Errorf("%s: %.4g forward FLOPs, want %.4g within 2%%", tt.name, got, want)
		}
	}
}

// Attention has no tensor of its own: its work goes to the last tensor before it.
func TestAttentionFLOPsOnValueBias(t *testing.T) {
	arch, err := Architecture("bert-base")
	if err != nil {
		t.Fatal(err)
	}
	flops := func(name string) float64 {
		i := slices.IndexFunc(arch, func(l Layer) bool { return l.Name == name })
		if i < 0 {
			t.Fatalf("no tensor %q", name)
		}
		return arch[i].ForwardFLOPs
	}
	s, d, h := 128.0, 768.0, 12.0
	want := s*d + 4*s*s*d + softmaxFLOPs*h*s*s
	if got := flops("encoder.layer.3.attention.self.value.bias"); got != want {
		t.Errorf("value bias FLOPs = %g, want %g (its add and the attention)", got, want)
	}
	if got := flops("encoder.layer.3.attention.self.query.bias"); got != s*d {
		t.Errorf("query bias FLOPs = %g, want %g", got, s*d)
	}
}

func TestArchitectureUnknown(t *testing.T) {
	if _, err := Architecture("resnet51"); err == nil || !strings.Contains(err.Error(), `"resnet51"`) {
		t.Errorf("Architecture(resnet51) error = %v, want one naming it", err)
	}
	if _, err := Builtin("resnet51"); err == nil || !strings.Contains(err.Error(), `"resnet51"`) {
		t.Errorf("Builtin(resnet51) error = %v, want one naming it", err)
	}
}

const validJSON = `{"model":"m","batch_size":2,"forward_ms":1,"tensors":[{"name":"a","numel":3,"backward_ms":0.5}],"update_ms":0.1}`

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"unknown key", `{"model":"m","batch_size":2,"forward_ms":1,"tensors":[{"name":"a","numel":3,"backward_ms":0.5}],"update_ms":0.1,"speed":2}`, `unknown field "speed"`},
		{"unknown tensor key", `{"model":"m","batch_size":2,"forward_ms":1,"tensors":[{"name":"a","numel":3,"backward":0.5}],"update_ms":0.1}`, `unknown field "backward"`},
		{"negative forward", `{"model":"m","batch_size":2,"forward_ms":-1,"tensors":[{"name":"a","numel":3,"backward_ms":0.5}],"update_ms":0.1}`, `"forward_ms" must be a time in [0, 86400000] ms`},
		{"huge forward", `{"model":"m","batch_size":2,"forward_ms":1e300,"tensors":[{"name":"a","numel":3,"backward_ms":0.5}],"update_ms":0.1}`, `"forward_ms" must be a time in`},
		{"negative backward", `{"model":"m","batch_size":2,"forward_ms":1,"tensors":[{"name":"a","numel":3,"backward_ms":-0.5}],"update_ms":0.1}`, `tensor 0 (a): backward_ms must be`},
		{"duplicate name", `{"model":"m","batch_size":2,"forward_ms":1,"tensors":[{"name":"a","numel":3,"backward_ms":0.5},{"name":"a","numel":1,"backward_ms":0.5}],"update_ms":0.1}`, `name "a" appears twice`},
		{"empty tensors", `{"model":"m","batch_size":2,"forward_ms":1,"tensors":[],"update_ms":0.1}`, `"tensors" is empty`},
		{"no model", `{"batch_size":2,"forward_ms":1,"tensors":[{"name":"a","numel":3,"backward_ms":0.5}],"update_ms":0.1}`, `"model" is missing`},
		{"zero batch", `{"model":"m","batch_size":0,"forward_ms":1,"tensors":[{"name":"a","numel":3,"backward_ms":0.5}],"update_ms":0.1}`, `"batch_size" must be positive`},
		{"zero numel", `{"model":"m","batch_size":2,"forward_ms":1,"tensors":[{"name":"a","numel":0,"backward_ms":0.5}],"update_ms":0.1}`, `numel must be positive`},
		{"negative dims", `{"model":"m","batch_size":2,"forward_ms":1,"tensors":[{"name":"a","numel":3,"dims":-1,"backward_ms":0.5}],"update_ms":0.1}`, `tensor 0 (a): dims must not be negative`},
		{"shape of another size", `{"model":"m","batch_size":2,"forward_ms":1,"tensors":[{"name":"a","numel":6,"dims":2,"shape":[2,2],"backward_ms":0.5}],"update_ms":0.1}`, `tensor 0 (a): shape [2 2] does not hold 6 elements in 2 dimensions`},
		{"shape of other dims", `{"model":"m","batch_size":2,"forward_ms":1,"tensors":[{"name":"a","numel":6,"dims":1,"shape":[2,3],"backward_ms":0.5}],"update_ms":0.1}`, `does not hold 6 elements in 1 dimensions`},
		{"not JSON", `{"model":`, `decoding JSON`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.json))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse error = %v, want one containing %q", err, tt.want)
			}
		})
	}
	if _, err := Parse([]byte(validJSON)); err != nil {
		t.Errorf("Parse of a valid profile: %v", err)
	}
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(path, []byte(`{"model":"m","batch_size":2,"forward_ms":1,"tensors":[],"update_ms":0}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `"tensors" is empty`) {
		t.Errorf("Load error = %v, want one naming %s and the problem", err, path)
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("Load of a missing file: error = %v, want one naming it", err)
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	builtin, err := Builtin("resnet50")
	if err != nil {
		t.Fatal(err)
	}
	tests := []*Profile{
		builtin,
		{Model: "tiny", BatchSize: 4, ForwardMS: 1.25, TailMS: 0.125, UpdateMS: 1.0 / 3,
			Tensors: []Tensor{{Name: "b", Numel: 7, BackwardMS: 0.1}, {Name: "w", Numel: 70, BackwardMS: 2.0 / 3}}},
	}
	for _, want := range tests {
		t.Run(want.Model, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "p.json")
			if err := want.Save(path); err != nil {
				t.Fatal(err)
			}
			got, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := profileDiff(got, want, 0); diff != "" {
				t.Error(diff)
			}
		})
	}
	bad := &Profile{Model: "m", BatchSize: 1}
	if err := bad.Save(filepath.Join(t.TempDir(), "p.json")); err == nil || !strings.Contains(err.Error(), `"tensors" is empty`) {
		t.Errorf("Save of a profile with no tensors: error = %v", err)
	}
}

func TestFromFLOPs(t *testing.T) {
	arch := []Layer{{"a", 10, 100, 4, nil}, {"b", 20, 300, 1, nil}, {"c", 5, 0, 0, nil}, {"d", 1, 600, 2, nil}}
	p, err := FromFLOPs("toy", "test", 8, arch, 31, 1)
	if err != nil {
		t.Fatal(err)
	}
	// 30 ms of compute: 10 forward, 20 backward split 100:300:0:600 in reverse order.
	want := &Profile{Model: "toy", Source: "test", BatchSize: 8, ForwardMS: 10, UpdateMS: 1,
		Tensors: []Tensor{
			{Name: "d", Numel: 1, Dims: 2, BackwardMS: 12},
			{Name: "c", Numel: 5, BackwardMS: 0},
			{Name: "b", Numel: 20, Dims: 1, BackwardMS: 6},
			{Name: "a", Numel: 10, Dims: 4, BackwardMS: 2},
		}}
	if diff := profileDiff(p, want, 1e-12); diff != "" {
		t.Error(diff)
	}
	if got := p.IterationMS(); math.Abs(got-31) > 1e-12 {
		t.Errorf("IterationMS = %g, want 31", got)
	}
	if got := p.Params(); got != 36 {
		t.Errorf("Params = %d, want 36", got)
	}
}

// Every builtin is a FLOP split: backward is 2/3 of the compute, each tensor's share is
// proportional to its FLOPs, and the order is the reverse of forward.
func TestBuiltinIsFLOPSplit(t *testing.T) {
	for _, name := range Architectures() {
		t.Run(name, func(t *testing.T) {
			p, err := Builtin(name)
			if err != nil {
				t.Fatal(err)
			}
			arch, err := Architecture(name)
			if err != nil {
				t.Fatal(err)
			}
			m, err := measurementOf(name)
			if err != nil {
				t.Fatal(err)
			}
			arch = withHead(arch, m.headFLOPs)
			compute := p.IterationMS() - p.UpdateMS
			if got, want := p.BackwardMS(), 2*compute/3; !near(got, want, 1e-9) {
				t.Errorf("backward = %g ms, want 2/3 of %g = %g", got, compute, want)
			}
			if got, want := p.ForwardMS, compute/3; !near(got, want, 1e-9) {
				t.Errorf("forward = %g ms, want %g", got, want)
			}
			if len(p.Tensors) != len(arch) {
				t.Fatalf("%d tensors, want %d", len(p.Tensors), len(arch))
			}
			perFLOP := p.BackwardMS() / ArchFLOPs(arch)
			for i, tensor := range p.Tensors {
				l := arch[len(arch)-1-i]
				if tensor.Name != l.Name || tensor.Numel != l.Numel {
					t.Fatalf("tensor %d is %s (%d), want %s (%d): reverse forward order", i, tensor.Name, tensor.Numel, l.Name, l.Numel)
				}
				if want := perFLOP * l.ForwardFLOPs; !near(tensor.BackwardMS, want, 1e-9) {
					t.Errorf("%s: backward %g ms, want %g", l.Name, tensor.BackwardMS, want)
				}
			}
			if p.Params() != ArchParams(arch) || p.UpdateMS <= 0 || !strings.Contains(p.Source, "V100") {
				t.Errorf("params %d, update %g ms, source %q", p.Params(), p.UpdateMS, p.Source)
			}
			if want := updateMS(p.Params(), m.bytes); p.UpdateMS != want {
				t.Errorf("update = %g ms, want %g", p.UpdateMS, want)
			}
		})
	}
}

func TestFromFLOPsErrors(t *testing.T) {
	ok := []Layer{{"w", 4, 8, 0, nil}, {"b", 2, 1, 0, nil}}
	tests := []struct {
		name      string
		model     string
		batch     int
		arch      []Layer
		iter, upd float64
		want      string
	}{
		{"no layers", "m", 1, nil, 10, 1, "no tensors"},
		{"unnamed", "m", 1, []Layer{{"", 1, 1, 0, nil}}, 10, 1, "layer 0 has no name"},
		{"duplicate", "m", 1, []Layer{{"w", 1, 1, 0, nil}, {"w", 1, 1, 0, nil}}, 10, 1, `name "w" appears twice`},
		{"zero numel", "m", 1, []Layer{{"w", 0, 1, 0, nil}}, 10, 1, "numel must be positive"},
		{"negative FLOPs", "m", 1, []Layer{{"w", 1, -1, 0, nil}}, 10, 1, "forward FLOPs must be finite and >= 0"},
		{"NaN FLOPs", "m", 1, []Layer{{"w", 1, math.NaN(), 0, nil}}, 10, 1, "forward FLOPs must be finite"},
		{"no FLOPs", "m", 1, []Layer{{"w", 1, 0, 0, nil}}, 10, 1, "must sum to a positive"},
		{"zero iteration", "m", 1, ok, 0, 0, "iteration time must be positive"},
		{"infinite iteration", "m", 1, ok, math.Inf(1), 0, "iteration time must be positive and finite"},
		{"negative update", "m", 1, ok, 10, -1, "update time must be"},
		{"update fills iteration", "m", 1, ok, 10, 10, "leaves no compute"},
		{"no model", "", 1, ok, 10, 1, `"model" is missing`},
		{"zero batch", "m", 0, ok, 10, 1, `"batch_size" must be positive`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromFLOPs(tt.model, "", tt.batch, tt.arch, tt.iter, tt.upd)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestScaled(t *testing.T) {
	p := &Profile{Model: "m", Source: "measured", BatchSize: 4, ForwardMS: 8, TailMS: 2, UpdateMS: 1,
		Tensors: []Tensor{{Name: "b", Numel: 1, BackwardMS: 4}, {Name: "w", Numel: 9, BackwardMS: 6}}}
	tests := []struct {
		speed  float64
		want   *Profile
		errHas string
	}{
		{2, &Profile{Model: "m", Source: "measured, sped up 2x", BatchSize: 4, ForwardMS: 4, TailMS: 1, UpdateMS: 0.5,
			Tensors: []Tensor{{Name: "b", Numel: 1, BackwardMS: 2}, {Name: "w", Numel: 9, BackwardMS: 3}}}, ""},
		{0.5, &Profile{Model: "m", Source: "measured, sped up 0.5x", BatchSize: 4, ForwardMS: 16, TailMS: 4, UpdateMS: 2,
			Tensors: []Tensor{{Name: "b", Numel: 1, BackwardMS: 8}, {Name: "w", Numel: 9, BackwardMS: 12}}}, ""},
		{1, p, ""},
		{0, nil, "must be positive"},
		{-1, nil, "must be positive"},
		{math.Inf(1), nil, "finite"},
		{math.NaN(), nil, "must be positive"},
	}
	for _, tt := range tests {
		got, err := p.Scaled(tt.speed)
		if tt.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("Scaled(%g) error = %v, want one containing %q", tt.speed, err, tt.errHas)
			}
			continue
		}
		if err != nil {
			t.Errorf("Scaled(%g): %v", tt.speed, err)
			continue
		}
		if diff := profileDiff(got, tt.want, 0); diff != "" {
			t.Errorf("Scaled(%g): %s", tt.speed, diff)
		}
	}
	if p.ForwardMS != 8 || p.Tensors[0].BackwardMS != 4 {
		t.Error("Scaled changed the original")
	}
}

// The shipped profiles are what Builtin produces now, so that they cannot go stale. Any
// other profile shipped beside them must at least load.
func TestShippedProfiles(t *testing.T) {
	const dir = "../profiles"
	for _, name := range Architectures() {
		t.Run(name, func(t *testing.T) {
			want, err := Builtin(name)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Load(filepath.Join(dir, name+".json"))
			if err != nil {
				t.Fatalf("%v (regenerate with go run ./tools/genprofiles)", err)
			}
			// A tolerance, not equality: compilers may fuse multiply-adds on some CPUs.
			if diff := profileDiff(got, want, 1e-12); diff != "" {
				t.Errorf("%s/%s.json is stale (regenerate with go run ./tools/genprofiles): %s", dir, name, diff)
			}
		})
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range paths {
		if _, err := Load(path); err != nil {
			t.Error(err)
		}
	}
}

// profileDiff describes the first difference between two profiles, with times compared to
// a relative tolerance; "" if there is none.
func profileDiff(got, want *Profile, tol float64) string {
	switch {
	case got.Model != want.Model:
		return fmt.Sprintf("model %q, want %q", got.Model, want.Model)
	case got.Source != want.Source:
		return fmt.Sprintf("source %q, want %q", got.Source, want.Source)
	case got.BatchSize != want.BatchSize:
		return fmt.Sprintf("batch size %d, want %d", got.BatchSize, want.BatchSize)
	case !near(got.ForwardMS, want.ForwardMS, tol), !near(got.TailMS, want.TailMS, tol), !near(got.UpdateMS, want.UpdateMS, tol):
		return fmt.Sprintf("forward, tail, update %g, %g, %g ms, want %g, %g, %g", got.ForwardMS, got.TailMS, got.UpdateMS,
			want.ForwardMS, want.TailMS, want.UpdateMS)
	case len(got.Tensors) != len(want.Tensors):
		return fmt.Sprintf("%d tensors, want %d", len(got.Tensors), len(want.Tensors))
	}
	for i, g := range got.Tensors {
		if w := want.Tensors[i]; g.Name != w.Name || g.Numel != w.Numel || g.Dims != w.Dims || !near(g.BackwardMS, w.BackwardMS, tol) {
			return fmt.Sprintf("tensor %d is %+v, want %+v", i, g, w)
		}
	}
	return ""
}

func near(a, b, tol float64) bool {
	return a == b || math.Abs(a-b) <= tol*math.Max(math.Abs(a), math.Abs(b))
}
