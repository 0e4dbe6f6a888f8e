# MISTAKE: optimizer.zero_grad() is called between loss.backward() and
# optimizer.step(), so the optimizer never sees a gradient: nothing is learned.
# FIX: call optimizer.zero_grad() before the forward (or right after step()).
# RUN: tensorscope run --headless examples/mistakes/zero_grad_before_step.py
# expect: zero_grad_before_step ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
loss_fn = nn.CrossEntropyLoss()
for step in range(5):
    x, y = torch.randn(16, 10), torch.randint(0, 3, (16,))
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.zero_grad()
    opt.step()
