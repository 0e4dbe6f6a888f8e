# BUG: a deep plain stack of twelve Linear layers initialised with std=1: at the first
# backward every layer's weight gradient is so large that its float32 norm overflows
# (one exploding stack, named at its root), and a Linear's backward then overflows to Inf.
# FIX: the default initialisation (or nn.init.kaiming_uniform_), normalisation layers,
# torch.nn.utils.clip_grad_norm_.
# expect: exploding_gradient ""
# expect: non_finite "1"
import torch
from torch import nn

torch.manual_seed(0)
layers = []
for i in range(12):
    lin = nn.Linear(64, 64)
    nn.init.normal_(lin.weight, std=1.0)
    layers.append(lin)
model = nn.Sequential(*layers, nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
for step in range(10):
    x, y = torch.randn(32, 64), torch.randn(32, 1)
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
