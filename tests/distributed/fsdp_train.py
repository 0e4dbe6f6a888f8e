"""FSDP2 (fully_shard) on gloo: every parameter sharded across the ranks."""
import os
import sys
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
for layer in (model[0], model[2]):
    fully_shard(layer)
fully_shard(model)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(3):
    gen = torch.Generator().manual_seed(step * 10 + rank)
    loss = model(torch.randn(4, 8, generator=gen)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    sys.stdout.write(f"LOSS {rank} {step} {loss.item():.8f}\n")
    sys.stdout.flush()
dist.destroy_process_group()
# torch 2.13's gloo leaves a joinable C++ thread that aborts the interpreter's exit
# under load ("terminate called without an active exception", plain runs too):
# end here, as the finished rank it is (under `tensorscope run`, os._exit still
# finishes the run first)
os._exit(0)
