# BUG: a hand-written MSE `((pred - y) ** 2).mean()` with pred [N, 1] and y [N]: the
# difference broadcasts to [N, N] and the model learns the mean of y.
# expect: loss_broadcast "out"
import torch
from torch import nn

torch.manual_seed(0)
class Reg(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Sequential(nn.Linear(5, 32), nn.ReLU())
        self.out = nn.Linear(32, 1)
    def forward(self, x):
        return self.out(self.hidden(x))
model = Reg()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
x = torch.randn(256, 5)
y = x @ torch.randn(5) + 0.1 * torch.randn(256)
for step in range(6):
    idx = torch.randint(0, 256, (32,))
    pred = model(x[idx])
    loss = ((pred - y[idx]) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, round(loss.item(), 4))
