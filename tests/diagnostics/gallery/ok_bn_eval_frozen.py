# CORRECT: BatchNorm layers kept in eval mode with frozen affine parameters
# (a common fine-tuning recipe with small batches); the rest trains.
# expect: none
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(x.mean(dim=(2, 3)))


def freeze_bn(model):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.eval()
            for p in m.parameters():
                p.requires_grad_(False)


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.01)
for step in range(5):
    model.train()
    freeze_bn(model)
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 2, (4,))
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
