# MISTAKE: a large negative bias in the layer feeding the ReLU makes every unit
# output zero for the whole batch, so no gradient flows through it.
# FIX: use the default initialisation (or a LeakyReLU / a smaller learning rate).
# RUN: tensorscope run --headless examples/mistakes/dead_activation.py
# expect: dead_activation "act"
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 64)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(64, 2)
        nn.init.constant_(self.fc1.bias, -20.0)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(5):
    x, y = torch.randn(32, 10), torch.randint(0, 2, (32,))
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
