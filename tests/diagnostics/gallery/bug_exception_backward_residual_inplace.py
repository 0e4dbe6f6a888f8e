# MISTAKE: a residual block adds the shortcut in place into the ReLU's output
# (out += identity), which ReLU's backward needs: loss.backward() raises.
# FIX: out = out + identity.
# expect: exception "blocks.1"
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.act = nn.ReLU()

    def forward(self, x):
        identity = x
        out = self.act(self.conv(x))
        out += identity
        return out


torch.manual_seed(0)
model = nn.Sequential()
model.add_module("stem", nn.Conv2d(3, 4, 3, padding=1))
model.add_module("blocks", nn.Sequential(Block(4), Block(4)))
model.add_module("pool", nn.AdaptiveAvgPool2d(1))
model.add_module("flat", nn.Flatten())
model.add_module("head", nn.Linear(4, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(2):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(torch.randn(4, 3, 8, 8)), torch.randint(0, 3, (4,)))
    loss.backward()
    opt.step()
