# CORRECT: one module called twice per forward (shared weights), and a siamese
# model called twice per step before a single backward.
# expect: none
import torch
from torch import nn


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Sequential(nn.Linear(16, 16), nn.ReLU())
        self.out = nn.Linear(16, 1)

    def forward(self, x):
        return self.out(self.block(self.block(x)))


torch.manual_seed(0)
model = Shared()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(5):
    a, b = torch.randn(8, 16), torch.randn(8, 16)
    opt.zero_grad()
    ya, yb = model(a), model(b)
    loss = nn.functional.mse_loss(ya - yb, torch.zeros(8, 1))
    loss.backward()
    opt.step()
