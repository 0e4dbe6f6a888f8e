# MISTAKE: clip_grad_norm_ with max_norm=0 (0 typed for 1.0) scales every
# gradient to zero: backward works, the optimizer steps on zeros, nothing learns.
# FIX: clip_grad_norm_(model.parameters(), max_norm=1.0).
# expect: zeroed_gradients ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
for step in range(25):
    x, y = torch.randn(16, 10), torch.randn(16, 1)
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), max_norm=0)
    opt.step()
print(round(loss.item(), 5))
