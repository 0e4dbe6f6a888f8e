# CORRECT: deliberate gradient accumulation over 4 micro-batches, then step and zero_grad.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
loss_fn = nn.CrossEntropyLoss()
accum = 4
opt.zero_grad()
for i in range(12):
    x, y = torch.randn(8, 10), torch.randint(0, 3, (8,))
    (loss_fn(model(x), y) / accum).backward()
    if (i + 1) % accum == 0:
        opt.step()
        opt.zero_grad()
