# CORRECT: a frozen, pretrained-style backbone (requires_grad=False, eval mode
# so its BatchNorm and Dropout stay fixed) under a trainable head.
# expect: none
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Dropout(0.2), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 4))

    def forward(self, x):
        return self.head(self.backbone(x))


torch.manual_seed(0)
model = Net()
model.backbone.requires_grad_(False)
opt = torch.optim.Adam(model.head.parameters(), lr=1e-3)
for step in range(5):
    model.train()
    model.backbone.eval()
    x, y = torch.randn(8, 3, 16, 16), torch.randint(0, 4, (8,))
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
