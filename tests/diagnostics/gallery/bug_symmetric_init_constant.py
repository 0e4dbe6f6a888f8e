# MISTAKE: every Linear initialised with the same constant: each hidden unit
# computes the same value and gets the same gradient, so the 64 units of each
# hidden layer stay identical and the net works as if one unit wide.
# FIX: keep the default init (or nn.init.kaiming_uniform_); biases may be zero.
# expect: symmetric_init "0"
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                      nn.Linear(64, 4))
for layer in model:
    if isinstance(layer, nn.Linear):
        nn.init.constant_(layer.weight, 0.02)
        nn.init.zeros_(layer.bias)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for step in range(12):
    x, y = torch.randn(32, 20), torch.randint(0, 4, (32,))
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
print(round(loss.item(), 4))
