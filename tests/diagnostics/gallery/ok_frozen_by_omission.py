# CORRECT (but wasteful): a pretrained-style backbone "frozen" by passing only
# the head's parameters to the optimizer; at most an info finding.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential()
model.add_module("backbone", nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU()))
model.add_module("fc", nn.Linear(32, 3))
opt = torch.optim.SGD(model.fc.parameters(), lr=0.1)
for step in range(4):
    x, y = torch.randn(16, 10), torch.randint(0, 3, (16,))
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
