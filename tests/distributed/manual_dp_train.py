"""Data parallelism by hand on gloo (launched by torchrun): each rank all-reduces its
gradients itself, no DDP. ``--bug`` seeds each rank differently and never broadcasts
the weights: the ranks apply the same averaged gradient to different models.
``--nan-at N`` puts a NaN in rank 1's data at step N (the all-reduce carries it to
rank 0). Prints
``LOSS <rank> <step> <loss>``."""
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0 if "--bug" not in sys.argv else rank)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(6):
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(step * 7 + rank))
    if rank == 1 and f"--nan-at={step}" in sys.argv:
        x[0, 1] = float("nan")
    loss = model(x).pow(2).mean()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= world
    opt.step()
    opt.zero_grad()
    sys.stdout.write(f"LOSS {rank} {step} {loss.item():.8f}\n")
    sys.stdout.flush()
dist.destroy_process_group()
os._exit(0)   # see ddp_train.py: gloo's exit under load
