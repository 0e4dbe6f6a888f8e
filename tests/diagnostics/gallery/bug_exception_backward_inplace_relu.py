# MISTAKE: nn.ReLU(inplace=True) right after a Sigmoid: the ReLU overwrites the
# sigmoid's output, which the sigmoid's backward needs, so loss.backward() raises
# "one of the variables needed for gradient computation has been modified by an
# inplace operation". FIX: nn.ReLU() (inplace=False), or drop the ReLU.
# expect: exception "gate.2"
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(10, 16)
        self.gate = nn.Sequential(nn.Linear(16, 16), nn.Sigmoid(), nn.ReLU(inplace=True))
        self.out = nn.Linear(16, 2)

    def forward(self, x):
        return self.out(self.gate(torch.relu(self.fc(x))))


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(torch.randn(8, 10)), torch.randint(0, 2, (8,)))
    loss.backward()
    opt.step()
