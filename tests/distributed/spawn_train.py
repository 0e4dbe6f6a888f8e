"""DDP started from the script with torch.multiprocessing.spawn (no launcher)."""
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn


def train(rank: int, world: int, port: int) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(4, 8), nn.ReLU(),
                                                              nn.Linear(8, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(4):
        gen = torch.Generator().manual_seed(100 * step + rank)
        loss = model(torch.randn(8, 4, generator=gen)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        sys.stdout.write(f"LOSS {rank} {step} {loss.item():.8f}\n")
        sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    mp.spawn(train, args=(2, port), nprocs=2)
