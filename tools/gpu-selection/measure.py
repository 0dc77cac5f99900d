#!/usr/bin/env python3
"""Measures the figures the simulator's GPU selection model is built from, on this machine's
GPU with PyTorch, and writes them as the JSON file `simulate --selection-costs` reads.

  python3 tools/gpu-selection/measure.py --out my-gpu.json            # on a machine with CUDA
  go run . simulate --selection-costs my-gpu.json --vary ...          # your GPU on the maps

The model prices a selection as PyTorch operators (each pays dispatch and a kernel launch),
waits of the host for a number from the GPU, and bytes moved at the bandwidth top-k reaches.
This script times each of those alone:

  dispatch_ns   an operator on a one-element tensor on the CPU, where there is no launch
  launch_ns     the same operator on the GPU, queued back to back, minus dispatch
  sync_ns       reading one number back (.item()) after such an operator, minus the operator
  bytes_per_ns  torch.topk of 1% of a large tensor: 20 bytes an element (four radix passes and
                a gather each read 4 bytes), over its time

--device cpu runs it without a GPU (launch and sync then come out near zero); it is how the
script is tested, not a measurement of anything the simulator models.
"""

import argparse
import json
import os
import statistics
import sys
import time


def timed(fn, sync, repeats, calls):
    """Median over repeats of the time of one of `calls` back-to-back calls, in ns."""
    results = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        sync()
        results.append((time.perf_counter_ns() - start) / calls)
    return statistics.median(results)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="torch device to measure (default cuda)")
    parser.add_argument("--elements", type=int, default=1 << 26, help="tensor size for the bandwidth (default 2^26)")
    parser.add_argument("--calls", type=int, default=2000, help="back-to-back calls per timed batch (default 2000)")
    parser.add_argument("--repeats", type=int, default=7, help="timed batches; the median is kept (default 7)")
    parser.add_argument("--out", default="-", help="file to write (default: standard output)")
    args = parser.parse_args(argv)
    if args.elements < 1000 or args.calls < 1 or args.repeats < 1:
        parser.error("--elements must be at least 1000, --calls and --repeats at least 1")

    try:
        import torch
    except ImportError:
        sys.exit("measure.py: PyTorch is not installed (pip install torch, or apt-get install python3-torch)")
    try:
        device = torch.device(args.device)
        torch.zeros(1, device=device)
    except (RuntimeError, AssertionError) as err:
        sys.exit(f"measure.py: device {args.device!r} is not usable here: {err}")

    gpu = device.type == "cuda"
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    one_cpu = torch.zeros(1)
    one = torch.zeros(1, device=device)

    dispatch = timed(lambda: one_cpu.add_(1), lambda: None, args.repeats, args.calls)
    op = timed(lambda: one.add_(1), sync, args.repeats, args.calls)
    read = timed(lambda: one.add_(1).item(), sync, args.repeats, max(1, args.calls // 10))

    x = torch.randn(args.elements, device=device)
    k = max(1, args.elements // 100)
    topk = timed(lambda: torch.topk(x.abs(), k, sorted=False), sync, args.repeats, 3)
    abs_pass = timed(lambda: x.abs(), sync, args.repeats, 3)
    # The model's top-k moves 8 bytes an element for abs and 20 for the top-k passes.
    bytes_per_ns = 28 * args.elements / topk if topk > 0 else 0

    name = torch.cuda.get_device_name(device) if gpu else f"{args.device} (a test run: no GPU)"
    result = {
        "device": f"{name}, PyTorch {torch.__version__}",
        "dispatch_ns": round(dispatch, 1),
        "launch_ns": round(max(op - dispatch, 0.0), 1),
        "sync_ns": round(max(read - op, 0.0), 1),
        "bytes_per_ns": round(bytes_per_ns, 3),
        "sources": {
            "dispatch_ns": f"measured: add_ on a one-element CPU tensor, median of {args.repeats} x {args.calls} calls",
            "launch_ns": f"measured: the same on {args.device}, back to back, minus dispatch",
            "sync_ns": "measured: .item() after each such call, minus the call",
            "bytes_per_ns": f"measured: abs and torch.topk of 1% of {args.elements} float32s, 28 bytes an element"
            f" (abs alone took {abs_pass / 1e6:.3f} ms)",
        },
    }
    text = json.dumps(result, indent=2) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, args.out)
        print(f"measure.py: wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
