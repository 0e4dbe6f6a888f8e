# MISTAKE: evaluation under torch.no_grad() without model.eval(): Dropout keeps
# dropping units and BatchNorm uses (and updates) batch statistics.
# FIX: call model.eval() before evaluating and model.train() after.
# RUN: tensorscope run --headless examples/mistakes/train_mode_in_eval.py
# expect: train_mode_in_eval "drop"
# expect: train_mode_in_eval "bn"
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 32)
        self.bn = nn.BatchNorm1d(32)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(32, 2)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.bn(self.fc1(x)))))


torch.manual_seed(0)
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(3):
    x, y = torch.randn(16, 10), torch.randint(0, 2, (16,))
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
with torch.no_grad():
    for _ in range(2):
        acc = (model(torch.randn(16, 10)).argmax(1) == 0).float().mean().item()
