# Multi-task training with two heads on a shared trunk: the first loss is
# backpropagated with retain_graph=True, the second without, gradients add up,
# then one step; an auxiliary head's loss is weighted. Imbalanced binary labels
# for the second task (few positives): small batches are often all negative.
# Correct code.
# expect: none
import torch
from torch import nn


class MultiTask(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.cls = nn.Linear(32, 2)
        self.reg = nn.Linear(32, 1)

    def forward(self, x):
        h = self.trunk(x)
        return self.cls(h), self.reg(h)


torch.manual_seed(0)
model = MultiTask()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
ce, mse = nn.CrossEntropyLoss(), nn.MSELoss()
for step in range(8):
    x = torch.randn(8, 12)
    y_cls = (torch.rand(8) < 0.05).long()
    y_reg = torch.randn(8, 1)
    logits, value = model(x)
    opt.zero_grad()
    ce(logits, y_cls).backward(retain_graph=True)
    (0.5 * mse(value, y_reg)).backward()
    opt.step()
