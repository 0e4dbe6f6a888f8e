# CORRECT: zero_grad(set_to_none=False) and model.zero_grad() variants.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for i in range(6):
    x, y = torch.randn(8, 10), torch.randn(8, 1)
    if i % 2:
        opt.zero_grad(set_to_none=False)
    else:
        model.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
