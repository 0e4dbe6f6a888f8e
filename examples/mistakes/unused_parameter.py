# MISTAKE: a layer is built in __init__ but forward() never calls it; its
# parameters never get a gradient.
# FIX: call the layer in forward(), or delete it.
# RUN: tensorscope run --headless examples/mistakes/unused_parameter.py
# expect: unused_parameter "extra"
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 32)
        self.extra = nn.Linear(32, 32)
        self.fc2 = nn.Linear(32, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    x, y = torch.randn(16, 10), torch.randint(0, 2, (16,))
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
