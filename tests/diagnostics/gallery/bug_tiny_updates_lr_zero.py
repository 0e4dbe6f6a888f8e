# MISTAKE: the only parameter group has lr=0 (a scheduler factor of 0).
# FIX: a non-zero learning rate; check the scheduler's lambda.
# expect: tiny_updates ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.0)
for step in range(31):
    x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    sched.step()
