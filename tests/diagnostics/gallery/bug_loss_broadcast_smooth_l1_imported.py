# MISTAKE: smooth_l1_loss imported by name, target [N] against predictions [N, 1].
# FIX: make the shapes equal (target.unsqueeze(1)).
# expect: loss_broadcast ""
import warnings

import torch
from torch import nn
from torch.nn.functional import huber_loss, smooth_l1_loss

warnings.simplefilter("ignore", UserWarning)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
for step in range(3):
    x = torch.randn(32, 4)
    y = x.sum(dim=1)
    opt.zero_grad()
    pred = model(x)
    loss = smooth_l1_loss(pred, y) + 0.0 * huber_loss(pred, y.unsqueeze(1))
    loss.backward()
    opt.step()
