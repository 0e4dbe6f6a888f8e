# MISTAKE: the model outputs [N, 1] but the target is [N]; MSELoss broadcasts
# them to [N, N] and the loss is meaningless (the warning was filtered away).
# FIX: make the shapes match: loss_fn(pred.squeeze(1), y) or y.unsqueeze(1).
# RUN: tensorscope run --headless examples/mistakes/loss_broadcast.py
# expect: loss_broadcast ""
import warnings

import torch
from torch import nn

warnings.filterwarnings("ignore")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.MSELoss()
for step in range(3):
    x, y = torch.randn(32, 6), torch.randn(32)
    opt.zero_grad()
    loss_fn(model(x), y).backward()
    opt.step()
