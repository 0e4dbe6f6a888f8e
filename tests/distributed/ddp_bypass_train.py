"""A 2-rank DDP job whose training forward goes through ``model.module`` (launched by
torchrun): the gradients are never averaged. ``--fixed`` calls the wrapper and
evaluates through ``model.module`` under ``no_grad`` (never a finding)."""
import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--fixed", action="store_true")
args = parser.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    gen = torch.Generator().manual_seed(10 * step + rank)
    x, y = torch.randn(16, 8, generator=gen), torch.randint(0, 3, (16,), generator=gen)
    opt.zero_grad()
    out = model(x) if args.fixed else model.module(x)
    loss = nn.functional.cross_entropy(out, y)
    loss.backward()
    opt.step()
    if args.fixed:
        model.module.eval()
        with torch.no_grad():
            model.module(x)
        model.module.train()
    print(f"LOSS {rank} {step} {loss.item():.8f}", flush=True)
dist.destroy_process_group()
os._exit(0)   # see ddp_train.py: torch 2.13's gloo can abort the interpreter's exit
