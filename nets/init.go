package nets

import (
	"math"
	"math/rand/v2"
)

// rng is the model's own random source. PCG's output for a seed is fixed by its specification;
// the conversions to floats are done here rather than by math/rand so that the values cannot
// change with the Go release. (Gorgonia's initialisers draw from a clock-seeded source.)
type rng struct {
	src *rand.PCG
}

func newRNG(seed int64, stream uint64) *rng {
	return &rng{src: rand.NewPCG(uint64(seed), stream)}
}

// float64 is uniform in [0, 1).
func (r *rng) float64() float64 { return float64(r.src.Uint64()>>11) / (1 << 53) }

// normal is standard normal (Box-Muller; one value per pair of draws keeps the stream simple).
func (r *rng) normal() float64 {
	u := 1 - r.float64() // (0, 1]
	v := r.float64()
	return math.Sqrt(-2*math.Log(u)) * math.Cos(2*math.Pi*v)
}

// Seed streams: parameters and dropout masks draw from separate sequences.
const (
	streamInit    = 0x6e6574732d696e69 // "nets-ini"
	streamDropout = 0x6e6574732d64726f // "nets-dro"
)

// initFn fills a new parameter of the given shape.
type initFn func(r *rng, v []float32, shape []int)

// kaimingFanOut is torchvision's ResNet convolution init: normal with std √(2/fan_out),
// fan_out = out_channels·kh·kw.
func kaimingFanOut(r *rng, v []float32, shape []int) {
	fanOut := shape[0]
	for _, d := range shape[2:] {
		fanOut *= d
	}
	std := math.Sqrt(2 / float64(fanOut))
	for i := range v {
		v[i] = float32(r.normal() * std)
	}
}

// uniform returns an init drawing from U(-bound, bound).
func uniform(bound float64) initFn {
	return func(r *rng, v []float32, _ []int) {
		for i := range v {
			v[i] = float32((2*r.float64() - 1) * bound)
		}
	}
}

// fanInUniform is PyTorch's default for Linear and Conv weights and biases: U(±1/√fan_in).
func fanInUniform(fanIn int) initFn { return uniform(1 / math.Sqrt(float64(fanIn))) }

// constant returns an init setting every element to c.
func constant(c float32) initFn {
	return func(_ *rng, v []float32, _ []int) {
		for i := range v {
			v[i] = c
		}
	}
}
