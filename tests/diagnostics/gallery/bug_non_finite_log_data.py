# MISTAKE: a feature is log(count), and some counts are zero: -inf enters with the
# data. The forward stays finite (tanh saturates), the backward turns it into NaN.
# FIX: log1p(count), or log(count + eps).
# expect: non_finite ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    counts = torch.randint(0, 5, (32, 4)).float()
    x = torch.log(counts)          # log(0) = -inf
    y = torch.randn(32, 1)
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
