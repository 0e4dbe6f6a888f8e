# MISTAKE: optimizer.step() is never called: the gradients are computed and
# zeroed every batch, the weights never change.
# expect: tiny_updates ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(8):
    x, y = torch.randn(8, 6), torch.randint(0, 2, (8,))
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
