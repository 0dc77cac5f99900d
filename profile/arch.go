package profile

import (
	"fmt"
	"slices"
	"strings"
)

// Architectures with published shapes, for models we do not train here. Tensor names and
// order follow the frameworks' named_parameters(): torchvision for the CNNs (ImageNet,
// 224x224), Hugging Face BertModel (with pooler, sequence length 128) and GPT2Model
// (sequence length 1024, output projection tied to wte) for the transformers.

// Elementwise costs, in FLOPs per element: rough, and small beside the matmuls.
const (
	normFLOPs    = 5 // BatchNorm/LayerNorm weight: statistics, normalisation and scale
	biasFLOPs    = 1 // any bias, including a norm's shift
	softmaxFLOPs = 5 // max, subtract, exp, sum, divide
	lookupFLOPs  = 1 // an embedding row copied into the output
)

var architectures = []struct {
	name  string
	build func() []Layer
}{
	{"resnet50", func() []Layer { return resnet([4]int{3, 4, 6, 3}) }},
	{"resnet152", func() []Layer { return resnet([4]int{3, 8, 36, 3}) }},
	{"vgg16", vgg16},
	{"bert-base", func() []Layer { return bert(bertBase) }},
	{"bert-large", func() []Layer { return bert(bertLarge) }},
	{"gpt2", func() []Layer { return gpt2(gpt2Small) }},
}

// Architectures names the architectures Architecture builds, and Builtin profiles.
func Architectures() []string {
	names := make([]string, len(architectures))
	for i, a := range architectures {
		names[i] = a.name
	}
	return names
}

// Architecture returns the parameter tensors of a named architecture in forward order.
func Architecture(name string) ([]Layer, error) {
	for _, a := range architectures {
		if a.name == name {
			return a.build(), nil
		}
	}
	return nil, fmt.Errorf("unknown architecture %q (have %s)", name, strings.Join(Architectures(), ", "))
}

// archBuilder collects an architecture's tensors in forward order.
type archBuilder struct{ layers []Layer }

// add adds a tensor of the given shape, as the framework stores it.
func (b *archBuilder) add(name string, shape []int, flops float64) {
	numel := 1
	for _, d := range shape {
		numel *= d
	}
	b.layers = append(b.layers, Layer{Name: name, Numel: numel, ForwardFLOPs: flops, Dims: len(shape), Shape: shape})
}

// extra adds work without a parameter tensor to the last tensor added (see Layer for why
// that one).
func (b *archBuilder) extra(flops float64) { b.layers[len(b.layers)-1].ForwardFLOPs += flops }

// conv adds a k x k convolution producing cout channels of hout x wout.
func (b *archBuilder) conv(name string, cin, cout, k, hout, wout int, bias bool) {
	out := float64(cout * hout * wout)
	b.add(name+".weight", []int{cout, cin, k, k}, 2*float64(cin*k*k)*out)
	if bias {
		b.add(name+".bias", []int{cout}, biasFLOPs*out)
	}
}

// batchNorm adds a BatchNorm over c channels of h x w.
func (b *archBuilder) batchNorm(name string, c, h, w int) {
	out := float64(c * h * w)
	b.add(name+".weight", []int{c}, normFLOPs*out)
	b.add(name+".bias", []int{c}, biasFLOPs*out)
}

// linear adds a linear layer applied to rows vectors per sample (the sequence length),
// its weight stored out x in as PyTorch's nn.Linear stores it.
func (b *archBuilder) linear(name string, in, out, rows int) {
	b.add(name+".weight", []int{out, in}, 2*float64(rows)*float64(in*out))
	b.add(name+".bias", []int{out}, biasFLOPs*float64(rows*out))
}

// conv1D adds GPT-2's Conv1D, a linear layer whose weight is stored in x out.
func (b *archBuilder) conv1D(name string, in, out, rows int) {
	b.add(name+".weight", []int{in, out}, 2*float64(rows)*float64(in*out))
	b.add(name+".bias", []int{out}, biasFLOPs*float64(rows*out))
}

// layerNorm adds a LayerNorm of width d applied to rows vectors per sample.
func (b *archBuilder) layerNorm(name string, d, rows int) {
	b.add(name+".weight", []int{d}, normFLOPs*float64(rows*d))
	b.add(name+".bias", []int{d}, biasFLOPs*float64(rows*d))
}

// embedding adds an n x d table looked up rows times per sample.
func (b *archBuilder) embedding(name string, n, d, rows int) {
	b.add(name+".weight", []int{n, d}, lookupFLOPs*float64(rows*d))
}

// resnet builds torchvision's bottleneck ResNet (v1.5: the stride is in the 3x3 conv) with
// the given number of blocks per stage. Activations, pooling and residual adds are left
// out: they are under 1% of the FLOPs.
func resnet(blocks [4]int) []Layer {
	b := &archBuilder{}
	b.conv("conv1", 3, 64, 7, 112, 112, false)
	b.batchNorm("bn1", 64, 112, 112)
	in, size := 64, 56 // after the stride-2 max pool
	for stage, n := range blocks {
		width := 64 << stage
		out := 4 * width
		for i := range n {
			next := size
			if i == 0 && stage > 0 {
				next = size / 2
			}
			p := fmt.Sprintf("layer%d.%d.", stage+1, i)
			b.conv(p+"conv1", in, width, 1, size, size, false)
			b.batchNorm(p+"bn1", width, size, size)
			b.conv(p+"conv2", width, width, 3, next, next, false)
			b.batchNorm(p+"bn2", width, next, next)
			b.conv(p+"conv3", width, out, 1, next, next, false)
			b.batchNorm(p+"bn3", out, next, next)
			if i == 0 {
				b.conv(p+"downsample.0", in, out, 1, next, next, false)
				b.batchNorm(p+"downsample.1", out, next, next)
			}
			in, size = out, next
		}
	}
	b.linear("fc", in, 1000, 1)
	return b.layers
}

// vgg16 builds torchvision's vgg16 (no BatchNorm). Module indices count the ReLU after
// each convolution and the max pools, as torchvision's Sequential does.
func vgg16() []Layer {
	const pool = 0
	b := &archBuilder{}
	in, size, index := 3, 224, 0
	for _, c := range []int{64, 64, pool, 128, 128, pool, 256, 256, 256, pool, 512, 512, 512, pool, 512, 512, 512, pool} {
		if c == pool {
			size /= 2
			index++
			continue
		}
		b.conv(fmt.Sprintf("features.%d", index), in, c, 3, size, size, true)
		in = c
		index += 2 // the conv and its ReLU
	}
	b.linear("classifier.0", in*size*size, 4096, 1)
	b.linear("classifier.3", 4096, 4096, 1)
	b.linear("classifier.6", 4096, 1000, 1)
	return b.layers
}

// transformerShape is what the transformer builders need.
type transformerShape struct {
	layers, hidden, heads, ffn, vocab, positions, seq int
}

var (
	bertBase  = transformerShape{layers: 12, hidden: 768, heads: 12, ffn: 3072, vocab: 30522, positions: 512, seq: 128}
	bertLarge = transformerShape{layers: 24, hidden: 1024, heads: 16, ffn: 4096, vocab: 30522, positions: 512, seq: 128}
	gpt2Small = transformerShape{layers: 12, hidden: 768, heads: 12, ffn: 3072, vocab: 50257, positions: 1024, seq: 1024}
)

// attentionFLOPs is the per-sample work of self-attention between the projections: the
// score matmul QK^T, the softmax over the scores and the matmul of the weights with V.
// Causal models are counted with full score matrices, as the frameworks compute them.
func attentionFLOPs(s transformerShape) float64 {
	scores := float64(s.seq) * float64(s.seq)
	return 2*2*scores*float64(s.hidden) + softmaxFLOPs*float64(s.heads)*scores
}

// bert builds Hugging Face's BertModel with its pooler.
func bert(s transformerShape) []Layer {
	b := &archBuilder{}
	d, n := s.hidden, s.seq
	b.embedding("embeddings.word_embeddings", s.vocab, d, n)
	b.embedding("embeddings.position_embeddings", s.positions, d, n)
	b.embedding("embeddings.token_type_embeddings", 2, d, n)
	b.layerNorm("embeddings.LayerNorm", d, n)
	for i := range s.layers {
		p := fmt.Sprintf("encoder.layer.%d.", i)
		b.linear(p+"attention.self.query", d, d, n)
		b.linear(p+"attention.self.key", d, d, n)
		b.linear(p+"attention.self.value", d, d, n)
		b.extra(attentionFLOPs(s))
		b.linear(p+"attention.output.dense", d, d, n)
		b.layerNorm(p+"attention.output.LayerNorm", d, n)
		b.linear(p+"intermediate.dense", d, s.ffn, n)
		b.linear(p+"output.dense", s.ffn, d, n)
		b.layerNorm(p+"output.LayerNorm", d, n)
	}
	b.linear("pooler.dense", d, d, 1) // on the [CLS] token only
	return b.layers
}

// gpt2 builds Hugging Face's GPT2Model, whose projections are Conv1D layers.
func gpt2(s transformerShape) []Layer {
	b := &archBuilder{}
	d, n := s.hidden, s.seq
	b.embedding("wte", s.vocab, d, n)
	b.embedding("wpe", s.positions, d, n)
	for i := range s.layers {
		p := fmt.Sprintf("h.%d.", i)
		b.layerNorm(p+"ln_1", d, n)
		b.conv1D(p+"attn.c_attn", d, 3*d, n)
		b.extra(attentionFLOPs(s))
		b.conv1D(p+"attn.c_proj", d, d, n)
		b.layerNorm(p+"ln_2", d, n)
		b.conv1D(p+"mlp.c_fc", d, s.ffn, n)
		b.conv1D(p+"mlp.c_proj", s.ffn, d, n)
	}
	b.layerNorm("ln_f", d, n)
	return b.layers
}

// Heads the training objective puts on top of the architectures above. Their work delays
// every gradient, so Builtin adds it to the last tensor in forward order, the first
// backprop reaches.

// mlmHeadFLOPs is BERT's pre-training heads per sample: the masked-LM transform (dense,
// LayerNorm) and vocabulary projection (tied to the word embeddings, with a bias) with its
// softmax over rows positions, and the next-sentence classifier on the pooled output.
func mlmHeadFLOPs(s transformerShape, rows int) float64 {
	r, d, v := float64(rows), float64(s.hidden), float64(s.vocab)
	transform := 2*r*d*d + biasFLOPs*r*d + (normFLOPs+biasFLOPs)*r*d
	decoder := 2*r*d*v + biasFLOPs*r*v + softmaxFLOPs*r*v
	nsp := 2*d*2 + biasFLOPs*2
	return transform + decoder + nsp
}

// lmHeadFLOPs is GPT-2's language-model head per sample: the projection onto the
// vocabulary (tied to wte) at every position and its softmax.
func lmHeadFLOPs(s transformerShape) float64 {
	r, d, v := float64(s.seq), float64(s.hidden), float64(s.vocab)
	return 2*r*d*v + softmaxFLOPs*r*v
}

// withHead returns a copy of arch with flops added to its last tensor.
func withHead(arch []Layer, flops float64) []Layer {
	arch = slices.Clone(arch)
	arch[len(arch)-1].ForwardFLOPs += flops
	return arch
}

// Optimizer update cost. The update is memory-bound: it streams every parameter's state
// through the GPU once, so it takes params x bytes per param / memory bandwidth. With a
// V100's peak HBM2 bandwidth this is a lower bound; unfused optimizers launch a kernel per
// tensor and take longer.
const (
	v100BytesPerMS = 900e9 / 1e3 // 900 GB/s
	// SGD with momentum reads weight, gradient and momentum, and writes weight and momentum.
	sgdBytes = 5 * 4
	// Adam reads weight, gradient and both moments, and writes weight and both moments.
	adamBytes = 7 * 4
	// LAMB is Adam plus a pass over the weights and the update for its trust-ratio norms.
	lambBytes = adamBytes + 2*4
)

func updateMS(params int, bytesPerParam float64) float64 {
	return float64(params) * bytesPerParam / v100BytesPerMS
}

// measurement is a published (or, for GPT-2, derived) step time of a model on one V100.
type measurement struct {
	batch int
	// stepMS is one step at batch. withUpdate says whether it includes the optimizer
	// update: throughput figures do; forward+backward timings, and runs that accumulate
	// gradients over many steps, do not.
	stepMS     float64
	withUpdate bool
	optimizer  string
	bytes      float64 // optimizer traffic per parameter
	// headFLOPs is the per-sample work of the training head outside the architecture.
	headFLOPs float64
	// what says what stepMS is and where it comes from.
	what string
}

// measurementOf returns the measurement behind a builtin profile. All are fp32, so that
// the profiles compare with one another.
func measurementOf(name string) (measurement, error) {
	switch name {
	case "resnet50":
		return measurement{
			batch: 32, stepMS: 32 / 367.29 * 1e3, withUpdate: true,
			optimizer: "SGD with momentum", bytes: sgdBytes,
			what: "fp32; ResNet-50 v1.5 (as torchvision's) trains at 367.29 img/s with batch 128 on one V100-SXM2-16GB " +
				"(Oneflow-Inc/DLPerf's run of NVIDIA DeepLearningExamples PyTorch, whose README gives 367 img/s), " +
				"taken per image at batch 32 (a V100 is a little less efficient there, so this is optimistic)",
		}, nil
	case "resnet152":
		return measurement{
			batch: 32, stepMS: 2 * 136.5, optimizer: "SGD with momentum", bytes: sgdBytes,
			what: "fp32; torchvision ResNet-152 forward+backward takes 136.5 ms at batch 16 on a V100 " +
				"(u39kun/deep-learning-benchmark, AWS p3, PyTorch 0.3, cuDNN 7.0), doubled for batch 32",
		}, nil
	case "vgg16":
		return measurement{
			batch: 32, stepMS: 2 * 83.5, optimizer: "SGD with momentum", bytes: sgdBytes,
			what: "fp32; torchvision VGG-16 forward+backward takes 83.5 ms at batch 16 on a V100 " +
				"(u39kun/deep-learning-benchmark, AWS p3, PyTorch 0.3, cuDNN 7.0), doubled for batch 32",
		}, nil
	case "bert-base":
		return bertBaseMeasurement(), nil
	case "bert-large":
		return measurement{
			batch: 32, stepMS: 32 / 46.78 * 1e3, optimizer: "LAMB", bytes: lambBytes,
			// TensorFlow's BERT gathers the 20 masked positions before the vocabulary
			// projection.
			headFLOPs: mlmHeadFLOPs(bertLarge, 20),
			what: "fp32; BERT-large pre-training (seq 128, MLM on 20 masked positions, NSP) runs 46.78 seq/s " +
				"with batch 32 on one V100-SXM2-32GB (NVIDIA DeepLearningExamples TensorFlow BERT README, " +
				"DGX-1 32GB, TF 20.06; gradient accumulation leaves the LAMB update out of the step)",
		}, nil
	case "gpt2":
		return gpt2Measurement(), nil
	}
	return measurement{}, fmt.Errorf("no builtin profile %q (have %s)", name, strings.Join(Architectures(), ", "))
}

func bertBaseMeasurement() measurement {
	return measurement{
		batch: 32, stepMS: 32 / 119.6 * 1e3, withUpdate: true, optimizer: "Adam", bytes: adamBytes,
		// That version's PyTorch BERT projects all 128 positions onto the vocabulary and
		// masks the loss.
		headFLOPs: mlmHeadFLOPs(bertBase, bertBase.seq),
		what: "fp32; BERT-base pre-training (seq 128, MLM head on all 128 positions, NSP, FusedAdam) runs 119.6 seq/s " +
			"with batch 32 on one V100-SXM2-16GB (Oneflow-Inc/DLPerf's run of NVIDIA DeepLearningExamples PyTorch BERT, NGC 20.03)",
	}
}

// gpt2Measurement derives GPT-2's step, for want of a published single-V100 fp32 figure:
// its training FLOPs at the FLOP rate BERT-base reaches, whose layers have the same
// 768 x 12 shapes.
func gpt2Measurement() measurement {
	base := bertBaseMeasurement()
	baseArch := bert(bertBase)
	baseCompute := base.stepMS - updateMS(ArchParams(baseArch), base.bytes)
	perMS := 3 * (ArchFLOPs(baseArch) + base.headFLOPs) * float64(base.batch) / baseCompute
	const batch = 8 // Hugging Face Trainer's default per-device batch
	head := lmHeadFLOPs(gpt2Small)
	return measurement{
		batch: batch, stepMS: 3 * (ArchFLOPs(gpt2(gpt2Small)) + head) * batch / perMS,
		optimizer: "Adam", bytes: adamBytes, headFLOPs: head,
		what: fmt.Sprintf("fp32; derived, not measured: GPT-2 small's training FLOPs (seq 1024, batch %d, tied LM head "+
			"on all positions) at the %.1f TFLOP/s that BERT-base (same 768x12 layers) reaches in fp32 on one V100 "+
			"(119.6 seq/s, Oneflow-Inc/DLPerf); optimistic, as the 1024x1024 attention softmax is memory-bound",
			batch, perMS/1e9),
	}
}

// Builtin returns the profile of a named architecture on one NVIDIA V100 (see
// Architectures): the FLOP split (FromFLOPs) of a published step time, plus an optimizer
// update costed from the parameter count and the V100's memory bandwidth. Source says
// where each figure comes from.
func Builtin(name string) (*Profile, error) {
	m, err := measurementOf(name)
	if err != nil {
		return nil, err
	}
	arch, err := Architecture(name)
	if err != nil {
		return nil, err
	}
	arch = withHead(arch, m.headFLOPs)
	params := ArchParams(arch)
	update := updateMS(params, m.bytes)
	iteration := m.stepMS
	if !m.withUpdate {
		iteration += update
	}
	source := fmt.Sprintf("FLOP split of %.1f ms per iteration on one NVIDIA V100, batch %d: %s; "+
		"update %.2f ms = %d params x %g B (%s) at 900 GB/s", iteration, m.batch, m.what, update, params, m.bytes, m.optimizer)
	return FromFLOPs(name, source, m.batch, arch, iteration, update)
}
