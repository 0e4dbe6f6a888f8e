# MISTAKE: optimizer.step() is called before loss.backward(): each step finds
# the gradients just cleared by zero_grad(), so nothing is ever updated.
# FIX: zero_grad(), forward, backward(), then step().
# expect: zero_grad_before_step ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(6):
    x, y = torch.randn(8, 6), torch.randn(8, 1)
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    opt.step()
    loss.backward()
