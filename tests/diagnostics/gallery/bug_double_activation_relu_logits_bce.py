# BUG: a binary classifier whose forward ends in F.relu, trained with
# F.binary_cross_entropy_with_logits: its logits are never negative.
# expect: double_activation ""
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 32)
        self.fc2 = nn.Linear(32, 1)
    def forward(self, x):
        return F.relu(self.fc2(F.relu(self.fc1(x))))
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(5):
    x = torch.randn(32, 6)
    y = (x[:, :1] > 0).float()
    opt.zero_grad()
    loss = F.binary_cross_entropy_with_logits(model(x), y)
    loss.backward()
    opt.step()
    print(step, round(loss.item(), 4))
