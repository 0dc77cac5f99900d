package baselines

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/dist/inproc"
	"github.com/ssfusion/ssfusion/pipeline/pipelinetest"
)

// flatPipelines are the pipelines built on flatGradient, by name.
var flatPipelines = map[string]func(compress.Config) pipelinetest.Factory{
	"exdyna": func(cfg compress.Config) pipelinetest.Factory { return exdynaFactory(cfg) },
	"oktopk": okTopkFactory,
	"spardl": sparDLFactory,
}

// TestFlatPipelinesAtDensityOneAreDense: sending every element gives the dense average,
// reported as density 1 with nothing missing.
func TestFlatPipelinesAtDensityOneAreDense(t *testing.T) {
	sizes := []int{300, 7, 1, 0, 2000, 64}
	grads := pipelinetest.Normal(sizes, nil)
	for name, factory := range flatPipelines {
		for _, world := range []int{1, 3} {
			res, err := pipelinetest.Run(world, sizes, nil, 3, grads, factory(compress.Config{Density: 1, Momentum: 0.5}))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := pipelinetest.CheckMean(res, grads, 1e-6); err != nil {
				t.Fatalf("%s, world %d: %v", name, world, err)
			}
			for r := range res {
				for s, m := range res[r].Metrics {
					if !m.HasDensity || m.DensityAchieved != 1 || m.TensorsMissing != 0 {
						t.Errorf("%s, world %d: rank %d step %d metrics %+v, want density 1 and nothing missing", name, world, r, s, m)
					}
				}
			}
		}
	}
}

// TestFlatPipelinesRejectNonFinite: a non-finite gradient element fails the step on every
// rank with a NonFiniteError, before it reaches a memory that would keep it.
func TestFlatPipelinesRejectNonFinite(t *testing.T) {
	sizes := []int{100, 100}
	grads := func(rank, step int) [][]float32 {
		g := pipelinetest.Normal(sizes, nil)(rank, step)
		if step == 1 {
			g[1][7] = float32(math.Inf(-1))
		}
		return g
	}
	for name, factory := range flatPipelines {
		_, err := pipelinetest.Run(3, sizes, nil, 2, grads, factory(compress.Config{Density: 0.1}))
		var nf *compress.NonFiniteError
		if !errors.As(err, &nf) {
			t.Errorf("%s: error %v is not a NonFiniteError", name, err)
		}
	}
}

// TestAppendPartsRefusesBadPairs: an allgathered message with a broken pair, an index
// outside its sender's part or out of order, or a non-finite value is refused, naming the
// sender.
func TestAppendPartsRefusesBadPairs(t *testing.T) {
	x, err := NewOkTopk(inproc.New(1)[0], pipelinetest.Tensors([]int{10}), compress.Config{Density: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	pair := func(at uint32, v float32) []byte {
		return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, at), math.Float32bits(v))
	}
	bounds := []int{0, 5, 10}
	good := append(pair(5, 1), pair(9, -2)...)
	if idx, vals, err := x.appendParts(nil, nil, [][]byte{pair(2, 3), good}, bounds); err != nil || len(idx) != 3 || idx[2] != 9 || vals[2] != -2 {
		t.Fatalf("good messages: %v %v, %v", idx, vals, err)
	}
	for name, m := range map[string][]byte{
		"broken pair":    good[:12],
		"outside":        pair(4, 1),
		"out of order":   append(pair(9, 1), pair(5, 1)...),
		"repeated":       append(pair(6, 1), pair(6, 1)...),
		"not finite":     pair(7, float32(math.NaN())),
		"past the model": pair(10, 1),
	} {
		if _, _, err := x.appendParts(nil, nil, [][]byte{nil, m}, bounds); err == nil || !strings.Contains(err.Error(), "rank 1") {
			t.Errorf("%s: %v, want an error naming rank 1", name, err)
		}
	}
}
