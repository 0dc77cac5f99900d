package trainer

import (
	"fmt"
	"math"

	"github.com/ssfusion/ssfusion/nets"
)

// SGD is stochastic gradient descent with momentum, Nesterov momentum and weight decay, with
// PyTorch's semantics (torch.optim.SGD, dampening 0): the decay is added to the gradient of the
// weights, not folded into the velocity as gorgonia's solver does.
type SGD struct {
	Momentum    float64
	Nesterov    bool
	WeightDecay float64

	velocity [][]float32
}

// NewSGD returns an optimizer for params.
func NewSGD(params []nets.Param, momentum float64, nesterov bool, weightDecay float64) *SGD {
	s := &SGD{Momentum: momentum, Nesterov: nesterov, WeightDecay: weightDecay}
	if momentum > 0 {
		s.velocity = make([][]float32, len(params))
		for i, p := range params {
			s.velocity[i] = make([]float32, len(p.Value))
		}
	}
	return s
}

// Step updates every parameter from its gradient with learning rate lr.
func (s *SGD) Step(params []nets.Param, lr float64) {
	lr32, wd, mu := float32(lr), float32(s.WeightDecay), float32(s.Momentum)
	for i, p := range params {
		w, g := p.Value, p.Grad
		if s.velocity == nil {
			for j := range w {
				w[j] -= lr32 * (g[j] + wd*w[j])
			}
			continue
		}
		v := s.velocity[i]
		for j := range w {
			d := g[j] + wd*w[j]
			v[j] = mu*v[j] + d
			if s.Nesterov {
				d += mu * v[j]
			} else {
				d = v[j]
			}
			w[j] -= lr32 * d
		}
	}
}

// ZeroGrad clears every gradient: gorgonia accumulates gradients across runs.
func ZeroGrad(params []nets.Param) {
	for _, p := range params {
		clear(p.Grad)
	}
}

// GradNorm returns the L2 norm of all gradients together, or an error naming the first
// parameter whose gradient holds NaN or Inf.
func GradNorm(params []nets.Param) (float64, error) {
	var sum float64
	for _, p := range params {
		var s float64
		for _, g := range p.Grad {
			s += float64(g) * float64(g)
		}
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return 0, fmt.Errorf("gradient of %s is not finite (NaN or Inf)", p.Name)
		}
		sum += s
	}
	return math.Sqrt(sum), nil
}

// ClipGradNorm scales all gradients together so that their L2 norm is at most maxNorm, as
// torch.nn.utils.clip_grad_norm_ does, and returns the norm before clipping.
func ClipGradNorm(params []nets.Param, maxNorm float64) (float64, error) {
	norm, err := GradNorm(params)
	if err != nil || maxNorm <= 0 || norm <= maxNorm {
		return norm, err
	}
	scale := float32(maxNorm / (norm + 1e-6))
	for _, p := range params {
		for j := range p.Grad {
			p.Grad[j] *= scale
		}
	}
	return norm, nil
}
