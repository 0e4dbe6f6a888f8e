# CORRECT: two parameter groups with different learning rates, and a scheduler.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
body = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
head = nn.Linear(32, 3)
model = nn.Sequential(body, head)
opt = torch.optim.SGD([
    {"params": body.parameters(), "lr": 0.01},
    {"params": head.parameters(), "lr": 0.1},
], momentum=0.9, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
for step in range(6):
    x, y = torch.randn(16, 10), torch.randint(0, 3, (16,))
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    sched.step()
