#!/usr/bin/env python3
"""Time data-parallel training of ResNet-20 with PyTorch DistributedDataParallel (gloo, on
loopback): P processes, each with its own batch, the SGD step included, as ssfusion's
`train --workers P --pipeline dense` trains.

Prints one line to stdout: "<global samples per second>"; everything else goes to stderr.
ddp.sh reads that line.
"""

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_step import ResNet20  # noqa: E402  the same architecture as the single-process benchmark


def worker(rank, args, results):
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=args.procs)
    torch.manual_seed(1)  # the same initial parameters on every rank, as ours
    model = DistributedDataParallel(ResNet20().train())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    gen = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    x = torch.randn(args.batch, 3, 32, 32, generator=gen)
    labels = torch.randint(10, (args.batch,), generator=gen)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), labels).backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.iters):
        step()
    dist.barrier()
    elapsed = time.perf_counter() - start
    if rank == 0:
        results.put(args.procs * args.batch * args.iters / elapsed)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, default=2, help="processes (ranks)")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads per process")
    ap.add_argument("--batch", type=int, default=32, help="batch per process")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    ap.add_argument("--iters", type=int, default=30, help="timed steps")
    ap.add_argument("--port", type=int, default=29533, help="rendezvous port on 127.0.0.1")
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    mp.spawn(worker, args=(args, results), nprocs=args.procs, join=True)
    rate = results.get()
    print(f"torch {torch.__version__} DDP (gloo), {args.procs} processes x {args.threads} thread(s), "
          f"batch {args.batch} each: {rate:.1f} samples/s over {args.iters} steps", file=sys.stderr)
    print(f"{rate:.1f}")


if __name__ == "__main__":
    main()
