# CORRECT: the loss is a custom sum computed in the loop (no loss module); the
# report's loss curve is filled from what backward() is called on.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(8):
    x = torch.randn(64, 8)
    y = x[:, :1] * 2.0
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).sum() / x.shape[0] + 1e-4 * sum(
        (p * p).sum() for p in model.parameters())
    loss.backward()
    opt.step()
