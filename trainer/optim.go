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
//
// Each update is one pass over the parameter, its gradient and its velocity with the
// choices (momentum, Nesterov) made outside the loop: at one thread per process the update
// is time that no other work hides.
func (s *SGD) Step(params []nets.Param, lr float64) {
	lr32, wd, mu := float32(lr), float32(s.WeightDecay), float32(s.Momentum)
	for i, p := range params {
		switch {
		case s.velocity == nil:
			sgdPlain(p.Value, p.Grad, lr32, wd)
		case s.Nesterov:
			sgdNesterov(p.Value, p.Grad, s.velocity[i], lr32, wd, mu)
		default:
			sgdMomentum(p.Value, p.Grad, s.velocity[i], lr32, wd, mu)
		}
	}
}

// The update kernels below work four elements at a time, and each element takes the same
// float32 operations in the same order as a plain loop would, so that the result is the
// same bit for bit whatever the length.

// sgdPlain does w -= lr*(g + wd*w).
func sgdPlain(w, g []float32, lr, wd float32) {
	g = g[:len(w)]
	j := 0
	for ; j+4 <= len(w); j += 4 {
		ww, gg := w[j:j+4:j+4], g[j:j+4:j+4]
		ww[0] -= lr * (gg[0] + wd*ww[0])
		ww[1] -= lr * (gg[1] + wd*ww[1])
		ww[2] -= lr * (gg[2] + wd*ww[2])
		ww[3] -= lr * (gg[3] + wd*ww[3])
	}
	for ; j < len(w); j++ {
		w[j] -= lr * (g[j] + wd*w[j])
	}
}

// sgdMomentum does v = mu*v + (g + wd*w), w -= lr*v.
func sgdMomentum(w, g, v []float32, lr, wd, mu float32) {
	g, v = g[:len(w)], v[:len(w)]
	j := 0
	for ; j+4 <= len(w); j += 4 {
		ww, gg, vv := w[j:j+4:j+4], g[j:j+4:j+4], v[j:j+4:j+4]
		v0 := mu*vv[0] + (gg[0] + wd*ww[0])
		v1 := mu*vv[1] + (gg[1] + wd*ww[1])
		v2 := mu*vv[2] + (gg[2] + wd*ww[2])
		v3 := mu*vv[3] + (gg[3] + wd*ww[3])
		vv[0], vv[1], vv[2], vv[3] = v0, v1, v2, v3
		ww[0] -= lr * v0
		ww[1] -= lr * v1
		ww[2] -= lr * v2
		ww[3] -= lr * v3
	}
	for ; j < len(w); j++ {
		vj := mu*v[j] + (g[j] + wd*w[j])
		v[j] = vj
		w[j] -= lr * vj
	}
}

// sgdNesterov does v = mu*v + d, w -= lr*(d + mu*v), with d = g + wd*w.
func sgdNesterov(w, g, v []float32, lr, wd, mu float32) {
	g, v = g[:len(w)], v[:len(w)]
	for j := range w {
		d := g[j] + wd*w[j]
		vj := mu*v[j] + d
		v[j] = vj
		w[j] -= lr * (d + mu*vj)
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
