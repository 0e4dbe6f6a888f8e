"""A learning-rate sweep launched by torchrun (gloo): every rank trains its own model
from one seed on the same batches, with a learning rate of its own, and ranks run
different numbers of steps; the only collective is the final loss's all-reduce.
The models are no replicas: after the first update they differ, although at that
update the gradients were equal (same weights, same batch). Prints
``LOSS <rank> <step> <loss>``."""
import os
import sys

import torch
import torch.distributed as dist
from torch import nn

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05 * (rank + 1))
gen = torch.Generator().manual_seed(0)
for step in range(4 + 2 * rank):
    x = torch.randn(16, 4, generator=gen)
    loss = nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
    opt.zero_grad()
    loss.backward()
    opt.step()
    sys.stdout.write(f"LOSS {rank} {step} {loss.item():.8f}\n")
    sys.stdout.flush()
last = torch.tensor([loss.item()])
dist.all_reduce(last)
dist.destroy_process_group()
os._exit(0)   # see ddp_train.py: gloo's exit under load
