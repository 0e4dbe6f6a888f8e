# MISTAKE: torch.sigmoid applied, then F.binary_cross_entropy_with_logits, which
# applies the sigmoid itself.
# FIX: give the raw logits to binary_cross_entropy_with_logits.
# expect: double_activation ""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(3):
    x, y = torch.randn(32, 6), torch.randint(0, 2, (32, 1)).float()
    opt.zero_grad()
    prob = torch.sigmoid(model(x))
    loss = F.binary_cross_entropy_with_logits(prob, y)
    loss.backward()
    opt.step()
