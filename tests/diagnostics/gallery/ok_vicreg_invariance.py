# CORRECT: a VICReg-style objective: the invariance term is an MSE between the
# embeddings of two views from the same network, both sides meant to be trained.
# expect: none
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 16))
opt = torch.optim.Adam(net.parameters(), lr=1e-3)


def variance(z: torch.Tensor) -> torch.Tensor:
    return F.relu(1 - torch.sqrt(z.var(dim=0) + 1e-4)).mean()


for step in range(5):
    x = torch.randn(32, 12)
    z_a, z_b = net(x + 0.1 * torch.randn_like(x)), net(x * 0.9)
    loss = 25 * F.mse_loss(z_a, z_b) + 25 * (variance(z_a) + variance(z_b))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
