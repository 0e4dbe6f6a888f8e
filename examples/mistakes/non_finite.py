# MISTAKE: a custom layer takes the log of values that can be zero or negative.
# FIX: clamp before the log (torch.log(x.clamp_min(1e-6))) or use a stable formulation.
# RUN: tensorscope run --headless examples/mistakes/non_finite.py
# expect: non_finite "logscale"
import torch
from torch import nn


class LogScale(nn.Module):
    def forward(self, x):
        return torch.log(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.logscale = LogScale()
        self.fc2 = nn.Linear(16, 1)

    def forward(self, x):
        return self.fc2(self.logscale(self.fc1(x)))


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(3):
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
