# MISTAKE: forward() ends in F.softmax and the training loop uses
# F.cross_entropy, which applies log-softmax itself.
# FIX: return logits from forward; use softmax only to read probabilities.
# expect: double_activation ""
import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 32)
        self.fc2 = nn.Linear(32, 5)

    def forward(self, x):
        return F.softmax(self.fc2(F.relu(self.fc1(x))), dim=-1)


torch.manual_seed(0)
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(3):
    x, y = torch.randn(16, 10), torch.randint(0, 5, (16,))
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
