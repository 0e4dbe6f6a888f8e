# CORRECT: raw 0..255 values where the model copes with them: a CNN whose first layer is a
# BatchNorm2d over the input, a model that scales its input inside forward, a tabular MLP
# with a few large integer columns (ages, counts, an income), and a regression whose
# *targets* are pixel-like integers 0..255 (the inputs are standardised).
# expect: none
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
images = (torch.rand(256, 3, 32, 32) * 256).to(torch.uint8)
labels = torch.randint(0, 10, (256,))

bn_first = nn.Sequential(nn.BatchNorm2d(3), nn.Conv2d(3, 8, 3), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))


class ScalesItself(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        x = x / 255.0
        return self.head(F.relu(self.conv(x)).mean((2, 3)))


for model in (bn_first, ScalesItself()):
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    for step in range(8):
        idx = torch.randint(0, 256, (16,))
        opt.zero_grad()
        F.cross_entropy(model(images[idx].float()), labels[idx]).backward()
        opt.step()

# tabular: age 18..90, number of purchases 0..200, income in thousands, three flags
rows = torch.cat([torch.randint(18, 91, (512, 1)), torch.randint(0, 201, (512, 1)),
                  torch.randint(10, 300, (512, 1)), torch.randint(0, 2, (512, 3))], 1).float()
tab = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 2))
opt = torch.optim.Adam(tab.parameters(), lr=1e-3)
for step in range(16):
    idx = torch.randint(0, 512, (32,))
    opt.zero_grad()
    F.cross_entropy(tab(rows[idx]), torch.randint(0, 2, (32,))).backward()
    opt.step()

# regression: standardised inputs, integer targets 0..255 (a brightness to predict)
reg = nn.Sequential(nn.Linear(16 * 16, 64), nn.ReLU(), nn.Linear(64, 16 * 16))
opt = torch.optim.Adam(reg.parameters(), lr=1e-3)
for step in range(16):
    x = torch.randn(32, 16 * 16)
    y = (torch.rand(32, 16 * 16) * 255).round()
    opt.zero_grad()
    F.mse_loss(reg(x), y).backward()
    opt.step()
