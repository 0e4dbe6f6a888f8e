# MISTAKE: a custom loss takes log of a probability that can be exactly 0.
# FIX: clamp the probability (p.clamp_min(1e-12)) or work with log-probabilities.
# expect: non_finite ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
    p = torch.softmax(model(x) * 200.0, dim=1)          # saturated: some p are exactly 0
    opt.zero_grad()
    loss = -(torch.log(p) * nn.functional.one_hot(y, 3)).sum(1).mean() + \
        torch.log(p).mean() * 0.0
    loss.backward()
    opt.step()
