# MISTAKE: a deep stack of sigmoid layers: each one shrinks the gradient, so
# the first layers receive almost none and stop learning.
# FIX: use ReLU/GELU, residual connections, or normalisation layers.
# RUN: tensorscope run --headless examples/mistakes/vanishing_gradient.py
# expect: vanishing_gradient "layers.0"
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, depth=16):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(32, 32) for _ in range(depth))
        self.out = nn.Linear(32, 2)

    def forward(self, x):
        for layer in self.layers:
            x = torch.sigmoid(layer(x))
        return self.out(x)


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(5):
    x, y = torch.randn(32, 32), torch.randint(0, 2, (32,))
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
