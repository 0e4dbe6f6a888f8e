# MISTAKE: a learning rate of 1e-9 typed instead of 1e-3: healthy gradients, but the
# weights barely move.
# FIX: lr=1e-3.
# expect: tiny_updates ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=1e-9, momentum=0.9)
for step in range(31):
    x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
