# MISTAKE: SGD with lr=50 on a regression: the weights blow up to NaN.
# expect: non_finite "2"
# expect: huge_updates ""
# expect: exploding_gradient ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=50.0)
for step in range(12):
    x = torch.randn(32, 8)
    y = x.sum(1, keepdim=True) * 3
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
