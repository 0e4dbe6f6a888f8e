# MISTAKE: F.l1_loss(pred, y) with pred [N, 1] and y [N] broadcasts to [N, N].
# FIX: F.l1_loss(pred.squeeze(1), y).
# expect: loss_broadcast ""
import warnings

import torch
import torch.nn.functional as F
from torch import nn

warnings.simplefilter("ignore", UserWarning)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(3):
    x = torch.randn(64, 4)
    y = x.sum(dim=1)
    opt.zero_grad()
    loss = F.l1_loss(model(x), y)
    loss.backward()
    opt.step()
