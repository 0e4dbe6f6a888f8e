# CORRECT: AdamW with a linear warmup from lr=0 over 30 steps, then constant.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, s / 30))
for step in range(45):
    x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    sched.step()
