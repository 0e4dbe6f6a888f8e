# MISTAKE: the block applies F.relu to a pre-activation that is always
# negative (bad bias init), so the block outputs only zeros.
# FIX: fix the initialisation; consider LeakyReLU.
# expect: dead_activation "block"
import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(10, 64)
        nn.init.constant_(self.fc.bias, -20.0)

    def forward(self, x):
        return F.relu(self.fc(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.out = nn.Linear(64, 2)

    def forward(self, x):
        return self.out(self.block(x))


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(5):
    x, y = torch.randn(32, 10), torch.randint(0, 2, (32,))
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
