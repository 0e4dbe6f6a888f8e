"""DDP with ZeroRedundancyOptimizer on gloo (launched by torchrun): each rank's local
Adam updates its shard of the parameters inside ZeRO's step, which then broadcasts
every shard to every rank. Prints ``LOSS <rank> <step> <loss>``."""
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.optim import ZeroRedundancyOptimizer

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.parallel.DistributedDataParallel(nn.Sequential(
    nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 1)))
opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=0.01)
for step in range(4):
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(step * 7 + rank))
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    sys.stdout.write(f"LOSS {rank} {step} {loss.item():.8f}\n")
    sys.stdout.flush()
dist.destroy_process_group()
os._exit(0)   # see ddp_train.py: gloo's exit under load
