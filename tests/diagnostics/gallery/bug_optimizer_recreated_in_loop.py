# MISTAKE: the optimizer is built inside the training loop: every step gets a
# fresh Adam whose moment estimates start at zero, so every step is Adam's
# first (sign-like steps of about lr whatever the gradient).
# FIX: build the optimizer once, before the loop.
# expect: optimizer_recreated ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
for step in range(12):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(16, 10), torch.randn(16, 1)
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(round(loss.item(), 5))
