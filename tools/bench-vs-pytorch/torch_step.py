#!/usr/bin/env python3
"""Time one PyTorch training step (forward, loss, backward; no optimizer step) on the shapes of
ssfusion's BenchmarkTrainStep (nets/bench_test.go), with the same architectures as nets/.

Prints one line to stdout: "<samples or tokens per second> <CPU ms per step>", both medians over
the timed steps; everything else goes to stderr. run.sh reads that line.
"""

import argparse
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    """ResNet's two-convolution block as nets/resnet.go builds it: convolutions without bias, and a
    1x1 convolution with BatchNorm as the shortcut when the shape changes (option B)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, 0, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.shortcut(x))


class ResNet20(nn.Module):
    """CIFAR ResNet-20 (He et al. 2016, section 4.2): a 3x3 stem, three stages of three blocks with
    16, 32 and 64 channels (strides 1, 2, 2), global average pooling and a linear layer."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        blocks, cin = [], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            for j in range(3):
                blocks.append(BasicBlock(cin, cout, stride if j == 0 else 1))
                cin = cout
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = self.layers(F.relu(self.bn1(self.conv1(x))))
        return self.fc(x.mean(dim=(2, 3)))


def vgg16_bn(classes=10):
    """VGG-16 with BatchNorm for CIFAR as nets/vgg.go builds it: 3x3 convolutions with bias, each
    followed by BatchNorm and ReLU, five max pools, then a single linear layer on 512 features."""
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    layers, cin = [], 3
    for c in cfg:
        if c == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [nn.Conv2d(cin, c, 3, 1, 1), nn.BatchNorm2d(c), nn.ReLU()]
            cin = c
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(512, classes))


class LSTMLM(nn.Module):
    """The word-level LSTM language model of nets/lstm.go (PyTorch's word_language_model
    RNNModel): embedding, stacked LSTM, linear decoder; untied weights, embedding size = hidden
    size, no dropout (the benchmark's Spec sets none). Input is time-major."""

    def __init__(self, vocab=10000, hidden=200, layers=2):
        super().__init__()
        self.encoder = nn.Embedding(vocab, hidden)
        self.rnn = nn.LSTM(hidden, hidden, layers)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, tokens, state):
        out, state = self.rnn(self.encoder(tokens), state)
        return self.decoder(out), state


def make_step(model_name):
    """Returns (step, samples per step): step() runs one training step on fixed random data."""
    if model_name == "lstm":
        vocab, hidden, layers, seq, batch = 10000, 200, 2, 35, 20
        model = LSTMLM(vocab, hidden, layers).train()
        tokens = torch.randint(vocab, (seq, batch))
        labels = torch.randint(vocab, (seq * batch,))
        state = [(torch.zeros(layers, batch, hidden), torch.zeros(layers, batch, hidden))]

        def step():
            model.zero_grad(set_to_none=True)
            # Our model carries the hidden state between steps without backpropagating into the
            # previous step (truncated BPTT): detach it likewise.
            h = tuple(s.detach() for s in state[0])
            logits, state[0] = model(tokens, h)
            F.cross_entropy(logits.view(-1, vocab), labels).backward()

        return step, seq * batch

    batch = 32
    model = (ResNet20() if model_name == "resnet20" else vgg16_bn()).train()
    x = torch.randn(batch, 3, 32, 32)
    labels = torch.randint(10, (batch,))

    def step():
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), labels).backward()

    return step, batch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", choices=["resnet20", "vgg16", "lstm"])
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first (default 5)")
    ap.add_argument("--iters", type=int, default=5, help="timed steps (default 5)")
    args = ap.parse_args()

    torch.manual_seed(1)
    torch.set_num_threads(args.threads)
    step, per_step = make_step(args.model)
    for _ in range(args.warmup):
        step()
    wall, cpu = [], []
    for _ in range(max(1, args.iters)):
        w0, c0 = time.perf_counter(), time.process_time()  # process_time counts every thread
        step()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    med = statistics.median(wall)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.model}: "
          f"median {med * 1e3:.1f} ms/step over {len(wall)} steps "
          f"(min {min(wall) * 1e3:.1f}, max {max(wall) * 1e3:.1f})", file=sys.stderr)
    print(f"{per_step / med:.1f} {statistics.median(cpu) * 1e3:.0f}")


if __name__ == "__main__":
    main()
