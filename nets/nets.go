// Package nets owns the Gorgonia models this project trains (ResNet, VGG, an LSTM language model
// and a small MLP): their ordered, named parameters, seeded initialisation, train and eval modes,
// and a backward pass that announces every parameter's gradient to a hook as soon as it is ready.
//
// A Model is built once for a fixed batch shape; each TrainStep runs forward and backward and
// adds the step's gradients into Param.Grad (the caller zeroes them between steps). Gradient
// hooks fire in backprop order, last layer first, while earlier layers are still to be
// computed, so that a gradient pipeline can start communicating early.
//
// Every model holds two compiled Gorgonia graphs over the same parameter tensors: a training
// graph, in which each parameter passes through an identity op whose derivative calls the hook,
// and a forward-only evaluation graph (BatchNorm on running statistics, no hooks, no gradients).
// Convolution, linear, BatchNorm, ReLU (alone or fused with a residual addition), max-pooling,
// embedding, dropout, LSTM and loss layers are ops of this package, written against Gorgonia's
// Op interface; reshapes and means are Gorgonia's. The ops' matrix products and convolutions run
// on package kernels, whose pure-Go fallback uses Gorgonia's BLAS (gorgonia.Use(netlib...)
// speeds it up too).
package nets

// Param is one trainable (or, in Buffers, non-trainable) tensor of a model. Value is the live
// backing storage of the Gorgonia nodes: writing to it (in place) changes the model. Grad is the
// accumulator each TrainStep adds the parameter's gradient into. Shape is PyTorch's layout
// (weights of linear layers are (out, in), convolution filters (out, in, kh, kw)).
type Param struct {
	Name  string
	Shape []int
	Value []float32
	Grad  []float32 // nil for buffers
}

// Numel is the number of elements of p.
func (p Param) Numel() int { return len(p.Value) }

// GradHook receives the gradient of parameter id (an index into Params()) during backward, once
// per TrainStep, as soon as the gradient is complete. grad is a flat view the hook may read and
// overwrite in place; what it leaves there is what Param.Grad receives for this step. The slice
// is only valid during the call.
//
// Hooks fire in exactly the reverse of Params order, on the goroutine Gorgonia executes the graph
// on, while TrainStep waits; the rest of backward runs only after the hook returns. A panic in the
// hook fails the step.
type GradHook func(id int, grad []float32)

// Batch is one mini-batch. Image models read X (B*C*H*W, NCHW) and Labels (B class indices).
// Language models read Tokens (B*T input ids, row b is stream b) and Labels (B*T next-token ids).
// N is the number of valid samples (rows); rows N..B-1 are padding, ignored by loss and accuracy.
//
// N must be in 1..B. The slices may hold either all B rows or only the first N (missing padding
// rows are zero); any other length, and a label or token out of range in a valid row, is an
// error. Padding rows affect nothing: BatchNorm takes its training statistics from the valid
// rows only, so a padded batch trains exactly as the batch of its valid rows would.
type Batch struct {
	X      []float32
	Tokens []int32
	Labels []int32
	N      int
}

// Result is what a forward pass measured on one batch.
type Result struct {
	Loss    float64 // mean loss over the valid samples (per token for language models)
	Correct int     // valid samples (tokens) whose arg-max prediction equals the label
	Count   int     // valid samples (tokens) counted
}

// Model is a network built for one batch shape. A Model is not safe for concurrent use.
type Model interface {
	// Name is the architecture name, e.g. "resnet20".
	Name() string
	// Params lists the trainable parameters in a fixed order (forward order, like PyTorch's
	// named_parameters); the same Spec gives the same order and, for the same seed, the
	// bit-identical values in every process.
	Params() []Param
	// Buffers lists non-trainable state (BatchNorm running mean and variance, PyTorch names such
	// as "bn1.running_mean"), in a fixed order; Value is live.
	Buffers() []Param
	// SetHook installs the gradient hook (nil removes it).
	SetHook(GradHook)
	// TrainStep runs forward and backward in train mode, adds the gradients into Param.Grad,
	// calls the hook for every parameter in backprop order and updates BatchNorm running
	// statistics. It does not change Param.Value.
	//
	// Gradients ACCUMULATE: the caller zeroes Param.Grad between steps. A NaN or infinite loss is
	// an error found before backward starts: no hook fires, no gradient is added, and BatchNorm
	// statistics and carried LSTM state stay as they were (as for any failed step; only a failure
	// during backward, such as a panicking hook, can leave gradients partly added).
	TrainStep(b *Batch) (Result, error)
	// Evaluate runs forward in eval mode (BatchNorm running statistics). It changes no parameter,
	// gradient, buffer or training state and calls no hook.
	Evaluate(b *Batch) (Result, error)
	// TrainState encodes what TrainStep carries from one call to the next besides
	// parameters and buffers (the dropout stream, an LSTM's hidden state), for a checkpoint.
	TrainState() ([]byte, error)
	// SetTrainState restores what TrainState of a model of the same Spec returned.
	SetTrainState([]byte) error
	// StepFLOPs is the floating-point work of one TrainStep: three times the forward pass's
	// multiply-adds (two operations each) of its convolutions, linear layers and LSTM gates,
	// since backward computes the gradients of both the inputs and the weights. Elementwise
	// work (BatchNorm, activations, pooling, the loss) is left out: it is memory-bound, and
	// measured against bandwidth instead.
	StepFLOPs() float64
	// Close releases the Gorgonia machines.
	Close() error
}

// Recurrent is implemented by language models that carry hidden state across batches
// (truncated BPTT).
type Recurrent interface {
	// ResetState zeroes the hidden state carried by TrainStep (at the start of an epoch).
	ResetState()
	// ResetEvalState zeroes the separate hidden state carried by Evaluate.
	ResetEvalState()
}

// Spec describes the model to build. New documents the architectures.
type Spec struct {
	Arch      string // mlp, resnet8|20|32|44|56|110, resnet18, vgg11|13|16|19, lstm (see Archs)
	BatchSize int
	Seed      int64

	// Image models.
	Channels, Height, Width int // input shape, e.g. 1x28x28 or 3x32x32
	Classes                 int
	WidthMult               float64 // VGG and ResNet channel width multiplier; 0 means 1
	Hidden                  []int   // MLP hidden sizes; nil means a default

	// Language models.
	Vocab   int
	SeqLen  int     // BPTT length T
	Embed   int     // embedding size; 0 means HiddenSize
	HSize   int     // LSTM hidden size
	Layers  int     // LSTM layers
	Dropout float64 // dropout probability on the embedding and on every LSTM layer's output (0 disables)
}
