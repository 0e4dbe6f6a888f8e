# BUG: gradual unfreezing: the encoder was frozen with requires_grad_(False), and
# "unfrozen" for the second phase with `model.encoder.requires_grad = True`: it stays frozen.
# expect: ineffective_freeze "encoder"
import torch
from torch import nn

torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
        self.head = nn.Linear(32, 3)
    def forward(self, x):
        return self.head(self.encoder(x))
model = Net()
model.encoder.requires_grad_(False)
crit = nn.CrossEntropyLoss()
def train(opt, steps):
    for step in range(steps):
        x, y = torch.randn(16, 16), torch.randint(0, 3, (16,))
        opt.zero_grad()
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
        print(step, round(loss.item(), 4))
train(torch.optim.Adam(model.head.parameters(), lr=1e-3), 4)
model.encoder.requires_grad = True
train(torch.optim.Adam(model.parameters(), lr=1e-4), 4)
