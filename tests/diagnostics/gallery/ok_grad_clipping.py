# CORRECT: gradient clipping before the optimizer step; the last loss kept in
# a variable; losses logged with .item().
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
history = []
best = None
for step in range(8):
    x, y = torch.randn(16, 10), torch.randn(16, 1) * 5
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    opt.step()
    history.append(loss.item())
    last_loss = loss
print(sum(history) / len(history), last_loss.item())
