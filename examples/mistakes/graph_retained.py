# MISTAKE: `total_loss += loss` keeps every step's autograd graph alive, so
# memory grows every step.
# FIX: accumulate a number: total_loss += loss.item() (or loss.detach()).
# RUN: tensorscope run --headless examples/mistakes/graph_retained.py
# expect: graph_retained ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
total_loss = 0.0
for step in range(8):
    x, y = torch.randn(16, 10), torch.randn(16, 1)
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    total_loss += loss
print(float(total_loss) / 8)
