# MISTAKE: a module normalises rows by x / (sqrt((x*x).sum(1)) + eps): a row of zeros
# (all ReLU units off) has an infinite derivative, so its backward makes NaN.
# FIX: put the epsilon inside the root (sqrt(s + eps)) or use F.normalize.
# expect: non_finite "norm"
import torch
from torch import nn


class RowNorm(nn.Module):
    def forward(self, x):
        return x / (torch.sqrt((x * x).sum(1, keepdim=True)) + 1e-6)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 4)
        self.act = nn.ReLU()
        self.norm = RowNorm()
        self.fc2 = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc2(self.norm(self.act(self.fc1(x))))


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(5):
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    x[:8] = -10.0 * model.fc1.weight.detach().sum(0).sign()   # rows with every unit off
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
