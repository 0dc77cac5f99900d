package nets

import (
	"errors"
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// net implements Model with two graphs over the same parameter tensors: a training graph, whose
// parameters pass through hook ops and which holds the backward pass, and a forward-only
// evaluation graph with BatchNorm in evaluation mode, no hooks and no gradients. Both are compiled
// once, by New; each run fills the input tensors in place.
//
// A net is not safe for concurrent use.
type net struct {
	spec Spec
	arch arch
	st   stepState
	hook GradHook

	params  []Param
	values  []*tensor.Dense // the parameters' tensors, bound in both graphs
	buffers []Param
	stats   []*bnStats
	saved   []float32 // BatchNorm statistics before the current step, restored if it fails
	inStep  bool      // saved holds the statistics of a step in progress

	// minBNSpatial is the smallest number of positions per channel and sample that a BatchNorm
	// layer sees (0 without BatchNorm): a training batch needs n·minBNSpatial ≥ 2.
	minBNSpatial int

	initRNG, dropRNG *rng

	// forwardFLOPs counts the training graph's forward pass, as its builder added layers.
	forwardFLOPs float64

	train, eval *phase
	closed      bool
}

// phase is one compiled graph with its inputs.
type phase struct {
	vm   G.VM
	tgt  *target
	loss *xentOp

	x     []float32 // image models: the input batch, bound to the graph's input node
	idx   []int     // language models: token ids, time-major
	lstms []*lstmOp
	masks []*maskOp
}

// recurrentNet is a net with carried LSTM state.
type recurrentNet struct{ *net }

// New builds the model described by spec, with parameters initialised from spec.Seed: the same
// Spec gives bit-identical parameters, in the same order, in every process.
//
// Architectures (Archs lists them; parameter names follow the PyTorch models):
//   - mlp: the flattened input, a linear layer and ReLU per Spec.Hidden size (default 128), a
//     linear layer to the classes; layers fc1, fc2, ...
//   - resnet8, resnet20, resnet32, resnet44, resnet56, resnet110: the CIFAR ResNet of depth 6n+2:
//     a 3×3 convolution with 16 channels, three stages of n basic blocks with 16, 32 and 64
//     channels (times WidthMult), stride 2 at stages 2 and 3, a 1×1 convolution with BatchNorm as
//     shortcut where the shape changes (option B), global average pooling, a linear layer "fc".
//   - resnet18: basic blocks [2, 2, 2, 2] with 64 to 512 channels and the CIFAR stem (3×3
//     convolution, stride 1, no max pool).
//   - vgg11, vgg13, vgg16, vgg19: VGG with BatchNorm after every convolution (which keeps its bias,
//     as in pytorch-cifar) and one linear layer "classifier" on the flattened features. A max pool
//     is skipped once the feature map is below 2×2: 28×28 inputs go 28→14→7→3→1→1.
//   - lstm: a word-level language model: embedding (Vocab×Embed, Embed defaults to HSize), Layers
//     LSTM layers of HSize, a linear decoder to Vocab; the loss is the mean cross entropy per
//     token. Spec.Dropout applies inverted dropout, with masks from the model's own generator
//     seeded by Spec.Seed, to the embedding and to every LSTM layer's output, in training only.
//     The returned Model also implements Recurrent.
//
// Initialisation draws from the model's own generator: convolutions Kaiming normal (fan_out, ReLU
// gain, as torchvision's ResNet), linear layers and VGG's convolution biases PyTorch's default
// U(±1/√fan_in), BatchNorm γ=1 and β=0, LSTM weights and biases U(±1/√HSize), embedding and
// decoder weights U(±0.1), decoder bias 0.
//
// Image inputs must be at least 1×1 (mlp), 4×4 (CIFAR ResNets), 8×8 (resnet18) or 2×2 (VGG).
// Training BatchNorm needs at least two values per channel, so a batch size of 1 is refused when
// the smallest feature map is 1×1.
func New(spec Spec) (Model, error) {
	s, a, err := spec.normalize()
	if err != nil {
		return nil, fmt.Errorf("nets: invalid spec: %w", err)
	}
	n, err := newNet(s, a)
	if err != nil {
		return nil, err
	}
	if a.family == lmFamily {
		return &recurrentNet{n}, nil
	}
	return n, nil
}

// newNet builds both graphs of a validated spec.
func newNet(s Spec, a arch) (n *net, err error) {
	defer func() {
		if r := recover(); r != nil {
			n, err = nil, fmt.Errorf("nets: building %s: panic: %v", s.Arch, r)
		}
	}()
	n = &net{
		spec:    s,
		arch:    a,
		initRNG: newRNG(s.Seed, streamInit),
		dropRNG: newRNG(s.Seed, streamDropout),
	}
	if n.train, err = n.build(true); err != nil {
		return nil, fmt.Errorf("nets: building %s: %w", s.Arch, err)
	}
	if n.minBNSpatial > 0 && s.BatchSize*n.minBNSpatial < 2 {
		return nil, fmt.Errorf("nets: invalid spec: batch size %d is too small for %s: its smallest BatchNorm input has %d position(s) per channel, and training needs at least 2 values per channel",
			s.BatchSize, s.Arch, n.minBNSpatial)
	}
	if n.eval, err = n.build(false); err != nil {
		return nil, fmt.Errorf("nets: building %s (evaluation graph): %w", s.Arch, err)
	}
	size := 0
	for _, st := range n.stats {
		size += 2 * len(st.mean)
	}
	n.saved = make([]float32, size)
	return n, nil
}

// build creates and compiles the training or the evaluation graph.
func (n *net) build(train bool) (*phase, error) {
	g := G.NewGraph()
	b := &builder{n: n, g: g, train: train}
	p := &phase{}
	var logits *G.Node
	if n.arch.family == lmFamily {
		logits = n.buildLM(b, p)
	} else {
		logits = n.buildImage(b, p)
	}
	if b.err != nil {
		return nil, b.err
	}
	if !train && b.pi != len(n.params) {
		return nil, fmt.Errorf("evaluation graph uses %d of %d parameters", b.pi, len(n.params))
	}
	loss, op, err := crossEntropy(logits, p.tgt, &n.st)
	if err != nil {
		return nil, err
	}
	p.loss = op
	if train {
		if _, err := G.Grad(loss, b.wrt...); err != nil {
			return nil, fmt.Errorf("gradient: %w", err)
		}
	}
	p.vm = G.NewTapeMachine(g)
	return p, nil
}

// buildImage adds the input node and the network of an image classifier.
func (n *net) buildImage(b *builder, p *phase) *G.Node {
	s := &n.spec
	shape := []int{s.BatchSize, s.Channels, s.Height, s.Width}
	if s.Arch == "mlp" {
		shape = []int{s.BatchSize, s.Channels * s.Height * s.Width}
	}
	size := 1
	for _, d := range shape {
		size *= d
	}
	p.x = make([]float32, size)
	t := tensor.New(tensor.WithBacking(p.x), tensor.WithShape(shape...))
	x := G.NewTensor(b.g, G.Float32, len(shape), G.WithShape(shape...), G.WithName("x"), G.WithValue(t))
	p.tgt = &target{labels: make([]int32, s.BatchSize), weight: make([]float32, s.BatchSize)}
	return n.arch.build(b, x, s)
}

func (n *net) Name() string { return n.spec.Arch }

func (n *net) Params() []Param { return append([]Param(nil), n.params...) }

func (n *net) Buffers() []Param { return append([]Param(nil), n.buffers...) }

// SetHook installs the gradient hook. The hook runs on the goroutine Gorgonia executes the graph
// on, while TrainStep waits; a panic in it fails the step.
func (n *net) SetHook(h GradHook) { n.hook = h }

// TrainStep runs forward and backward on b in training mode. The step's gradients are ADDED to
// Param.Grad (the caller zeroes them between steps), each one at the moment its hook fires. If the
// step fails, BatchNorm statistics and carried LSTM state are left as they were; gradients may
// have been partly accumulated only if the failure happened during backward (a non-finite loss
// is detected before backward starts).
func (n *net) TrainStep(b *Batch) (res Result, err error) {
	defer n.recoverInto(&err, "train step")
	if n.closed {
		return Result{}, n.errorf("train step", errors.New("model is closed"))
	}
	p := n.train
	if err := n.feed(p, b); err != nil {
		return Result{}, n.errorf("train step", err)
	}
	if n.minBNSpatial > 0 && b.N*n.minBNSpatial < 2 {
		return Result{}, n.errorf("train step", fmt.Errorf("a batch of %d valid sample(s) gives BatchNorm a single value per channel; training needs at least 2", b.N))
	}
	for _, m := range p.masks {
		n.fillMask(m.mask)
	}
	n.st.hook = n.hook
	n.st.bwdOps = 0
	n.saveStats()
	err = n.run(p, b.N)
	if err != nil {
		n.restoreStats()
	}
	n.inStep = false
	if err != nil {
		return Result{}, n.errorf("train step", err)
	}
	for _, l := range p.lstms {
		l.commit()
	}
	return n.result(p, b.N), nil
}

// Evaluate runs the evaluation graph on b. It reads parameters and BatchNorm running statistics
// and touches nothing the training graph uses; a language model carries its own evaluation state.
func (n *net) Evaluate(b *Batch) (res Result, err error) {
	defer n.recoverInto(&err, "evaluate")
	if n.closed {
		return Result{}, n.errorf("evaluate", errors.New("model is closed"))
	}
	p := n.eval
	if err := n.feed(p, b); err != nil {
		return Result{}, n.errorf("evaluate", err)
	}
	if err := n.run(p, b.N); err != nil {
		return Result{}, n.errorf("evaluate", err)
	}
	for _, l := range p.lstms {
		l.commit()
	}
	return n.result(p, b.N), nil
}

// Close releases the machines; the model cannot be used afterwards.
func (n *net) Close() error {
	if n.closed {
		return nil
	}
	n.closed = true
	var errs []error
	for _, p := range []*phase{n.train, n.eval} {
		if c, ok := p.vm.(interface{ Close() error }); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// run executes one compiled graph. Reset always follows, so that a failed run leaves the machine
// ready for the next one.
func (n *net) run(p *phase, valid int) error {
	n.st.n = valid
	p.loss.loss = 0
	err := func() error {
		defer p.vm.Reset()
		return p.vm.RunAll()
	}()
	if err != nil {
		if !finite(p.loss.loss) {
			return fmt.Errorf("loss is %v", p.loss.loss)
		}
		return err
	}
	return nil
}

func (n *net) result(p *phase, valid int) Result {
	count := valid
	if n.arch.family == lmFamily {
		count *= n.spec.SeqLen
	}
	return Result{Loss: p.loss.loss, Correct: p.loss.correct, Count: count}
}

func (n *net) errorf(what string, err error) error {
	return fmt.Errorf("nets: %s: %s: %w", n.spec.Arch, what, err)
}

// recoverInto turns a panic in the caller's goroutine (Gorgonia panics on some misuse) into an
// error. Panics inside Gorgonia's executor goroutine cannot be recovered by anyone, which is why
// inputs are validated before every run and this package's ops recover their own.
func (n *net) recoverInto(err *error, what string) {
	if r := recover(); r != nil {
		if n.inStep {
			n.restoreStats()
			n.inStep = false
		}
		*err = n.errorf(what, fmt.Errorf("panic: %v", r))
	}
}

func (n *net) saveStats() {
	n.inStep = true
	i := 0
	for _, st := range n.stats {
		i += copy(n.saved[i:], st.mean)
		i += copy(n.saved[i:], st.vari)
	}
}

func (n *net) restoreStats() {
	i := 0
	for _, st := range n.stats {
		i += copy(st.mean, n.saved[i:])
		i += copy(st.vari, n.saved[i:])
	}
}

// fillMask draws an inverted-dropout mask: 0 with probability p, 1/(1-p) otherwise.
func (n *net) fillMask(m []float32) {
	p := n.spec.Dropout
	keep := float32(1 / (1 - p))
	for i := range m {
		if n.dropRNG.float64() < p {
			m[i] = 0
		} else {
			m[i] = keep
		}
	}
}

// feed validates b and copies it into p's input tensors and targets.
func (n *net) feed(p *phase, b *Batch) error {
	if b == nil {
		return errors.New("nil batch")
	}
	bs := n.spec.BatchSize
	if b.N < 1 || b.N > bs {
		return fmt.Errorf("batch has N=%d valid samples, want 1..%d", b.N, bs)
	}
	if n.arch.family == lmFamily {
		return n.feedTokens(p, b)
	}
	s := &n.spec
	sample := s.Channels * s.Height * s.Width
	if len(b.X) != b.N*sample && len(b.X) != bs*sample {
		return fmt.Errorf("batch has %d input values, want N·%d = %d or BatchSize·%d = %d", len(b.X), sample, b.N*sample, sample, bs*sample)
	}
	if len(b.Labels) != b.N && len(b.Labels) != bs {
		return fmt.Errorf("batch has %d labels, want N = %d or BatchSize = %d", len(b.Labels), b.N, bs)
	}
	for r, l := range b.Labels[:b.N] {
		if l < 0 || int(l) >= s.Classes {
			return fmt.Errorf("label %d of sample %d is out of range [0, %d)", l, r, s.Classes)
		}
	}
	copy(p.x, b.X)
	clear(p.x[len(b.X):])
	w := 1 / float32(b.N)
	for r := range p.tgt.labels {
		if r < b.N {
			p.tgt.labels[r], p.tgt.weight[r] = b.Labels[r], w
		} else {
			p.tgt.labels[r], p.tgt.weight[r] = 0, 0
		}
	}
	return nil
}

// StepFLOPs implements Model.
func (n *net) StepFLOPs() float64 { return 3 * n.forwardFLOPs }
