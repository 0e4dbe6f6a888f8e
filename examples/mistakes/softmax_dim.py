# MISTAKE: log_softmax over dim 0 (the batch) instead of the classes, fed to
# F.nll_loss: each class column is normalised over the batch.
# FIX: F.log_softmax(x, dim=1).
# RUN: tensorscope run --headless examples/mistakes/softmax_dim.py
# expect: softmax_dim ""
import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 32)
        self.fc2 = nn.Linear(32, 5)

    def forward(self, x):
        return F.log_softmax(self.fc2(torch.relu(self.fc1(x))), dim=0)


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    x, y = torch.randn(16, 10), torch.randint(0, 5, (16,))
    opt.zero_grad()
    F.nll_loss(model(x), y).backward()
    opt.step()
