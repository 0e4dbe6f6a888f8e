# MISTAKE: forward() ends in torch.sigmoid and the output goes to
# BCEWithLogitsLoss, which applies a sigmoid itself.
# FIX: return the logits from forward (apply torch.sigmoid only for predictions),
# or keep the sigmoid and use nn.BCELoss.
# expect: double_activation ""
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 16)
        self.fc2 = nn.Linear(16, 1)

    def forward(self, x):
        return torch.sigmoid(self.fc2(torch.relu(self.fc1(x))))


torch.manual_seed(0)
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = nn.BCEWithLogitsLoss()
for step in range(3):
    x, y = torch.randn(16, 10), torch.randint(0, 2, (16, 1)).float()
    opt.zero_grad()
    loss_fn(model(x), y).backward()
    opt.step()
