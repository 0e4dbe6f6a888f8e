# MISTAKE: F.binary_cross_entropy(prob, y) with prob [N, 1] and y [N]. PyTorch raises
# on these shapes; the finding says why and how to fix it.
# FIX: F.binary_cross_entropy(prob.squeeze(1), y).
# expect: loss_broadcast ""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1), nn.Sigmoid())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    x, y = torch.randn(16, 4), torch.randint(0, 2, (16,)).float()
    opt.zero_grad()
    loss = F.binary_cross_entropy(model(x), y)
    loss.backward()
    opt.step()
