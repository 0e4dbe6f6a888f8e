"""A 2-rank DDP job on gloo for the distributed tests (launched by torchrun).

Prints ``LOSS <rank> <step> <loss>`` per step. ``--bug`` makes rank 1 change a
parameter after ``step()`` (a rank divergence); ``--nan-at N`` puts a NaN in rank 1's
data at step N (the all-reduce carries it to rank 0's weights); ``--raise-at N``
makes rank 1 raise after step N's update (rank 0's next collective loses its peer);
``--same-data loader`` gives every rank the same batches from a DataLoader without a
DistributedSampler (a mistake), ``--same-data randn`` draws them alike in the loop (a
toy script, never a finding);
``--eval-on-rank0`` has rank 0 alone run two evaluation forwards after each update; the model holds a BatchNorm
whose running statistics differ across ranks (never a finding).
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--bug", action="store_true")
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--nan-at", type=int, default=-1)
parser.add_argument("--raise-at", type=int, default=-1)
parser.add_argument("--eval-on-rank0", action="store_true")
parser.add_argument("--same-data", choices=["loader", "randn"])
args = parser.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.parallel.DistributedDataParallel(
    nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
if args.same_data == "loader":   # no DistributedSampler: every rank iterates all of it
    data = torch.randn(16 * args.steps, 4, generator=torch.Generator().manual_seed(7))
    batches = iter(torch.utils.data.DataLoader(data, batch_size=16))
for step in range(args.steps):
    if args.same_data == "loader":
        x = next(batches)
    elif args.same_data == "randn":   # every rank draws the whole batch the same way
        x = torch.randn(16, 4, generator=torch.Generator().manual_seed(1000 * step))
    else:
        gen = torch.Generator().manual_seed(1000 * step + rank)
        x = torch.randn(16, 4, generator=gen) + rank  # rank-dependent data: BN stats differ
    if rank == 1 and step == args.nan_at:
        x[0, 2] = float("nan")
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    if args.bug and rank == 1 and step == 1:
        with torch.no_grad():
            model.module[3].weight.add_(0.5)  # after step(): outside DDP's all-reduce
    if args.eval_on_rank0 and rank == 0:   # only rank 0 evaluates: two extra steps
        model.module.eval()
        with torch.no_grad():
            for _ in range(2):
                model.module(torch.randn(8, 4, generator=torch.Generator().manual_seed(step)))
        model.module.train()
    if rank == 1 and step == args.raise_at:
        raise RuntimeError("rank 1 stops on purpose")
    sys.stdout.write(f"LOSS {rank} {step} {loss.item():.8f}\n")
    sys.stdout.flush()
    if args.sleep:
        time.sleep(args.sleep)
dist.destroy_process_group()
# torch 2.13's gloo leaves a joinable C++ thread that aborts the interpreter's exit
# under load ("terminate called without an active exception", plain runs too):
# end here, as the finished rank it is (under `tensorscope run`, os._exit still
# finishes the run first)
os._exit(0)
