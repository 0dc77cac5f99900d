package nets

import (
	"slices"
	"testing"
)

// TestHooksFireOncePerParameterDuringBackward checks, for every family, that each parameter's
// hook fires exactly once per step, in exactly the reverse of Params order (the last layer first,
// the first layer last), with the full gradient of the step, and while backward is still running:
// the first hook fires before any instrumented backward kernel of an earlier layer has run and
// before the first layer's gradient exists.
func TestHooksFireOncePerParameterDuringBackward(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spec   Spec
		midway bool // the model has counted backward kernels (BatchNorm, LSTM) besides the loss's
	}{
		{"mlp", tinyMLP, false},
		{"resnet8", tinyResNet, true},
		{"resnet20", Spec{Arch: "resnet20", BatchSize: 2, Seed: 1, Channels: 3, Height: 8, Width: 8, Classes: 3, WidthMult: 0.25}, true},
		{"vgg11", tinyVGG, true},
		{"lstm", tinyLSTM, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := mustNew(t, tc.spec)
			params := n.Params()
			type call struct {
				id, bwd    int
				grad       []float32
				firstReady bool // the first parameter's gradient was already non-zero
			}
			var calls []call
			n.SetHook(func(id int, g []float32) {
				calls = append(calls, call{id, n.st.bwdOps, slices.Clone(g), slices.ContainsFunc(params[0].Grad, func(v float32) bool { return v != 0 })})
			})
			zeroGrads(n)
			mustTrain(t, n, randBatch(tc.spec, tc.spec.BatchSize, 1))
			total := n.st.bwdOps

			if len(calls) != len(params) {
				t.Fatalf("%d hook calls for %d parameters", len(calls), len(params))
			}
			for k, c := range calls {
				if want := len(params) - 1 - k; c.id != want {
					t.Fatalf("hook call %d is for %s, want %s (reverse Params order)", k, params[c.id].Name, params[want].Name)
				}
				if k > 0 && c.bwd < calls[k-1].bwd {
					t.Errorf("backward kernel count went down from %d to %d", calls[k-1].bwd, c.bwd)
				}
				if !slices.Equal(c.grad, params[c.id].Grad) {
					t.Errorf("%s: the hook saw a gradient different from the step's", params[c.id].Name)
				}
			}
			first, last := calls[0], calls[len(calls)-1]
			if first.firstReady {
				t.Errorf("%s's gradient existed when the first hook (%s) fired", params[0].Name, params[first.id].Name)
			}
			if first.bwd != 1 {
				t.Errorf("first hook (%s) fired after %d counted backward kernels, want 1 (the loss's)", params[first.id].Name, first.bwd)
			}
			if tc.midway && !(first.bwd < last.bwd && last.bwd == total) {
				t.Errorf("hooks did not spread over backward: first after %d kernels, last after %d, of %d", first.bwd, last.bwd, total)
			}
		})
	}
}

// TestHookOverwriteLandsInGrad checks that what a hook leaves in the slice is what Param.Grad
// receives, that gradients accumulate across steps, and that Evaluate and a removed hook fire
// nothing.
func TestHookOverwriteLandsInGrad(t *testing.T) {
	for _, spec := range []Spec{tinyResNet, tinyLSTM} {
		t.Run(spec.Arch, func(t *testing.T) {
			n := mustNew(t, spec)
			b := randBatch(spec, spec.BatchSize, 2)
			calls := 0
			n.SetHook(func(id int, g []float32) {
				calls++
				for i := range g {
					g[i] = float32(id) + float32(i)/1024
				}
			})
			zeroGrads(n)
			mustTrain(t, n, b)
			mustTrain(t, n, b) // accumulates
			for id, p := range n.Params() {
				for i, v := range p.Grad {
					if want := 2 * (float32(id) + float32(i)/1024); v != want {
						t.Fatalf("%s[%d] = %v after two overwritten steps, want %v", p.Name, i, v, want)
					}
				}
			}
			if calls != 2*len(n.params) {
				t.Errorf("%d hook calls in two steps, want %d", calls, 2*len(n.params))
			}
			before := cloneGrads(n)
			calls = 0
			mustEval(t, n, b)
			if calls != 0 {
				t.Errorf("Evaluate fired %d hooks", calls)
			}
			if !slices.EqualFunc(before, cloneGrads(n), slices.Equal) {
				t.Errorf("Evaluate changed Param.Grad")
			}
			n.SetHook(nil)
			mustTrain(t, n, b)
			if calls != 0 {
				t.Errorf("a removed hook fired %d times", calls)
			}
		})
	}
}
