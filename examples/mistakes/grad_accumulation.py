# MISTAKE: optimizer.zero_grad() is never called, so every backward adds to the
# gradients of all earlier batches.
# FIX: call optimizer.zero_grad() once per step (before backward or after step()).
# RUN: tensorscope run --headless examples/mistakes/grad_accumulation.py
# expect: grad_accumulation ""
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
    opt.step()
