# MISTAKE: weights initialised far too large in a deep linear stack: the
# gradient norm is huge and grows by orders of magnitude.
# FIX: use the default initialisation, normalisation layers, and
# torch.nn.utils.clip_grad_norm_.
# RUN: tensorscope run --headless examples/mistakes/exploding_gradient.py
# expect: exploding_gradient ""
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, depth=8):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(32, 32) for _ in range(depth))
        for layer in self.layers:
            nn.init.normal_(layer.weight, std=1.0)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
for step in range(4):
    x, y = torch.randn(16, 32), torch.randn(16, 32)
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
