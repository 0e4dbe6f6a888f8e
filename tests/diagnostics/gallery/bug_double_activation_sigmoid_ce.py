# MISTAKE: the classifier ends in torch.sigmoid and its output goes to
# nn.CrossEntropyLoss: the scores are squashed into [0, 1].
# FIX: give CrossEntropyLoss the raw logits.
# expect: double_activation ""
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
        self.head = nn.Linear(32, 5)

    def forward(self, x):
        return torch.sigmoid(self.head(self.body(x)))


torch.manual_seed(0)
model = Net()
criterion = nn.CrossEntropyLoss()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(3):
    x, y = torch.randn(16, 10), torch.randint(0, 5, (16,))
    opt.zero_grad()
    criterion(model(x), y).backward()
    opt.step()
