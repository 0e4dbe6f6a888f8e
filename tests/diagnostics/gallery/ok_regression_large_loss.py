# CORRECT: regression on unnormalised targets: the loss is large early and
# falls; a deep-ish ReLU MLP with a residual connection.
# expect: none
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(6, 64)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(64, 64), nn.ReLU()) for _ in range(4))
        self.out = nn.Linear(64, 1)

    def forward(self, x):
        h = torch.relu(self.inp(x))
        for b in self.blocks:
            h = h + b(h)
        return self.out(h)


torch.manual_seed(0)
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(8):
    x = torch.randn(32, 6)
    y = (x.sum(dim=1, keepdim=True) * 100.0 + 500.0)
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    print(step, loss.item())
