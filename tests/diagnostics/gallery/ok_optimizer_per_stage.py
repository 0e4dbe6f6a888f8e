# A new optimizer for each stage of training (several steps each, a lower
# learning rate each time), then plain SGD without momentum rebuilt every step
# (it keeps no state, so rebuilding it loses nothing).
# Correct code.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
for stage, lr in enumerate([1e-2, 3e-3, 1e-3]):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for step in range(5):
        x, y = torch.randn(16, 10), torch.randn(16, 1)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(stage, round(loss.item(), 5))
for step in range(5):
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss = nn.functional.mse_loss(model(torch.randn(16, 10)), torch.randn(16, 1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(round(loss.item(), 5))
