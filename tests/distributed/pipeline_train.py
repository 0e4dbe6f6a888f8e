"""Two pipeline stages on gloo (launched by torchrun): rank 0 holds stage 0, rank 1
stage 1, each its own model whose first layer has the same name and shape as the
other's (``0.weight`` [8, 8]) but not the same values. Activations and their
gradients go by ``send``/``recv``. Prints ``LOSS <step> <loss>`` on rank 1."""
import os
import sys

import torch
import torch.distributed as dist
from torch import nn

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)   # two different models: nothing keeps them equal
if rank == 0:
    stage = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
else:
    stage = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(stage.parameters(), lr=0.05)
for step in range(4):
    if rank == 0:
        h = stage(torch.randn(4, 8, generator=torch.Generator().manual_seed(step)))
        dist.send(h.detach(), 1)
        g = torch.empty_like(h)
        dist.recv(g, 1)
        h.backward(g)
    else:
        h = torch.empty(4, 8)
        dist.recv(h, 0)
        h.requires_grad_()
        loss = stage(h).pow(2).mean()
        loss.backward()
        dist.send(h.grad, 0)
        sys.stdout.write(f"LOSS {step} {loss.item():.8f}\n")
        sys.stdout.flush()
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
os._exit(0)   # see ddp_train.py: gloo's exit under load
