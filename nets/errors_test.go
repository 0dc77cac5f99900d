package nets

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestNewRejectsBadSpecs(t *testing.T) {
	img := Spec{Arch: "resnet20", BatchSize: 2, Channels: 3, Height: 32, Width: 32, Classes: 10}
	lm := Spec{Arch: "lstm", BatchSize: 2, Vocab: 10, SeqLen: 3, HSize: 4, Layers: 1}
	with := func(s Spec, f func(*Spec)) Spec { f(&s); return s }
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{"unknown arch", with(img, func(s *Spec) { s.Arch = "resnet21" }), "resnet110"},
		{"empty arch", with(img, func(s *Spec) { s.Arch = "" }), "unknown architecture"},
		{"zero batch", with(img, func(s *Spec) { s.BatchSize = 0 }), "batch size"},
		{"negative batch", with(lm, func(s *Spec) { s.BatchSize = -3 }), "batch size"},
		{"no channels", with(img, func(s *Spec) { s.Channels = 0 }), "input shape"},
		{"too small for resnet", with(img, func(s *Spec) { s.Height, s.Width = 3, 3 }), "too small"},
		{"too small for resnet18", with(img, func(s *Spec) { s.Arch, s.Height = "resnet18", 7 }), "too small"},
		{"one class", with(img, func(s *Spec) { s.Classes = 1 }), "classes"},
		{"negative width", with(img, func(s *Spec) { s.WidthMult = -1 }), "width multiplier"},
		{"NaN width", with(img, func(s *Spec) { s.WidthMult = math.NaN() }), "width multiplier"},
		{"zero hidden", with(img, func(s *Spec) { s.Arch, s.Hidden = "mlp", []int{8, 0} }), "hidden layer 1"},
		{"one word", with(lm, func(s *Spec) { s.Vocab = 1 }), "vocabulary"},
		{"no steps", with(lm, func(s *Spec) { s.SeqLen = 0 }), "sequence length"},
		{"no hidden", with(lm, func(s *Spec) { s.HSize = 0 }), "hidden size"},
		{"no layers", with(lm, func(s *Spec) { s.Layers = 0 }), "layers"},
		{"negative embedding", with(lm, func(s *Spec) { s.Embed = -1 }), "embedding"},
		{"dropout 1", with(lm, func(s *Spec) { s.Dropout = 1 }), "dropout"},
		{"NaN dropout", with(lm, func(s *Spec) { s.Dropout = math.NaN() }), "dropout"},
		{"BatchNorm on one value", with(img, func(s *Spec) { s.Arch, s.BatchSize, s.Height, s.Width = "vgg11", 1, 28, 28 }), "too small for vgg11"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(tc.spec)
			if err == nil {
				m.Close()
				t.Fatalf("New(%+v) succeeded", tc.spec)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
	// The edge of validity builds.
	for _, s := range []Spec{
		with(img, func(s *Spec) { s.Arch, s.Height, s.Width, s.BatchSize = "resnet8", 4, 4, 2 }),
		with(img, func(s *Spec) { s.Arch, s.BatchSize = "vgg11", 1 }), // last BatchNorm at 2x2
		with(img, func(s *Spec) { s.Arch, s.Channels, s.Height, s.Width = "vgg11", 1, 28, 28 }),
		with(img, func(s *Spec) { s.Arch, s.Channels, s.Height, s.Width = "resnet8", 1, 28, 28 }),
		with(lm, func(s *Spec) { s.Embed, s.Dropout = 3, 0.5 }),
	} {
		mustNew(t, s)
	}
}

func TestBadBatchesAreErrors(t *testing.T) {
	img := mustNew(t, tinyResNet)
	lm := mustNew(t, tinyLSTM)
	good := randBatch(tinyResNet, 4, 1)
	goodLM := randBatch(tinyLSTM, 3, 1)
	with := func(b *Batch, f func(*Batch)) *Batch {
		c := *b
		c.X, c.Tokens, c.Labels = slices.Clone(b.X), slices.Clone(b.Tokens), slices.Clone(b.Labels)
		f(&c)
		return &c
	}
	for _, tc := range []struct {
		name  string
		model *net
		batch *Batch
		want  string
	}{
		{"nil", img, nil, "nil batch"},
		{"N=0", img, with(good, func(b *Batch) { b.N = 0 }), "N=0"},
		{"N>B", img, with(good, func(b *Batch) { b.N = 5 }), "N=5"},
		{"short X", img, with(good, func(b *Batch) { b.X = b.X[:len(b.X)-1] }), "input values"},
		{"long X", img, with(good, func(b *Batch) { b.X = append(b.X, 0) }), "input values"},
		{"labels", img, with(good, func(b *Batch) { b.Labels = b.Labels[:2] }), "labels"},
		{"negative label", img, with(good, func(b *Batch) { b.Labels[1] = -1 }), "label -1 of sample 1"},
		{"label = classes", img, with(good, func(b *Batch) { b.Labels[3] = 4 }), "label 4 of sample 3"},
		{"tokens", lm, with(goodLM, func(b *Batch) { b.Tokens = b.Tokens[:5] }), "tokens"},
		{"token range", lm, with(goodLM, func(b *Batch) { b.Tokens[7] = 12 }), "token 12 at stream 1, step 3"},
		{"LM label range", lm, with(goodLM, func(b *Batch) { b.Labels[0] = -2 }), "label -2"},
		{"LM labels", lm, with(goodLM, func(b *Batch) { b.Labels = nil }), "labels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.model.TrainStep(tc.batch); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("TrainStep error %v, want one mentioning %q", err, tc.want)
			}
			if _, err := tc.model.Evaluate(tc.batch); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Evaluate error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	vggSpec := Spec{Arch: "vgg11", BatchSize: 2, Channels: 1, Height: 28, Width: 28, Classes: 3, WidthMult: 1.0 / 16}
	if _, err := mustNew(t, vggSpec).TrainStep(randBatch(vggSpec, 1, 1)); err == nil || !strings.Contains(err.Error(), "single value per channel") {
		t.Errorf("training BatchNorm on one value per channel: %v", err)
	}
	// Out-of-range labels in padding rows are ignored, and the models still work.
	mustTrain(t, img, with(good, func(b *Batch) { b.N, b.Labels[3] = 3, 99 }))
	mustTrain(t, lm, goodLM)
}

// TestNonFiniteLossIsAnErrorThatChangesNothing feeds a NaN and checks the error names it, no hook
// fires, and gradients and BatchNorm statistics are as before.
func TestNonFiniteLossIsAnErrorThatChangesNothing(t *testing.T) {
	n := mustNew(t, tinyResNet)
	mustTrain(t, n, randBatch(tinyResNet, 4, 1))
	fired := 0
	n.SetHook(func(int, []float32) { fired++ })
	grads := cloneGrads(n)
	var bufs [][]float32
	for _, b := range n.Buffers() {
		bufs = append(bufs, slices.Clone(b.Value))
	}
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		b := randBatch(tinyResNet, 4, 2)
		b.X[5] = v
		_, err := n.TrainStep(b)
		if err == nil || !strings.Contains(err.Error(), "NaN") && !strings.Contains(err.Error(), "Inf") {
			t.Fatalf("TrainStep on input %v: error %v, want one naming the non-finite loss", v, err)
		}
		if _, err := n.Evaluate(b); err == nil {
			t.Errorf("Evaluate on input %v succeeded", v)
		}
	}
	if fired != 0 {
		t.Errorf("%d hooks fired on a non-finite loss", fired)
	}
	if !slices.EqualFunc(grads, cloneGrads(n), slices.Equal) {
		t.Errorf("a failed step changed the gradients")
	}
	for i, b := range n.Buffers() {
		if !slices.Equal(bufs[i], b.Value) {
			t.Errorf("a failed step changed %s", b.Name)
		}
	}
	mustTrain(t, n, randBatch(tinyResNet, 4, 3))
}

func TestHookPanicIsAnError(t *testing.T) {
	n := mustNew(t, tinyMLP)
	n.SetHook(func(id int, _ []float32) {
		if id == 2 {
			panic("boom")
		}
	})
	if _, err := n.TrainStep(randBatch(tinyMLP, 4, 1)); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("TrainStep with a panicking hook: %v", err)
	}
	n.SetHook(nil)
	mustTrain(t, n, randBatch(tinyMLP, 4, 1))
}

func TestClosedModelIsAnError(t *testing.T) {
	n := mustNew(t, tinyMLP)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.TrainStep(randBatch(tinyMLP, 4, 1)); err == nil {
		t.Errorf("TrainStep on a closed model succeeded")
	}
	if _, err := n.Evaluate(randBatch(tinyMLP, 4, 1)); err == nil {
		t.Errorf("Evaluate on a closed model succeeded")
	}
}
