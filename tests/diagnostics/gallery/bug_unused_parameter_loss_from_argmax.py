# MISTAKE: the "loss" counts wrong predictions from argmax (a step function: no
# gradient), with a small weight penalty added so backward() runs without an error.
# Only the penalty's gradient reaches the weights; nothing is learned from the data.
# expect: unused_parameter ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(8):
    x, y = torch.randn(16, 10), torch.randint(0, 4, (16,))
    errors = (model(x).argmax(dim=1) != y).float().mean()
    penalty = 1e-4 * sum(p.pow(2).sum() for p in model.parameters())
    loss = errors + penalty
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step}: error rate {errors.item():.3f}")
