# MISTAKE: model.eval() for validation, then training resumes without
# model.train(): Dropout is off and BatchNorm stops learning batch statistics.
# FIX: call model.train() at the start of every training epoch.
# RUN: tensorscope run --headless examples/mistakes/eval_mode_in_training.py
# expect: eval_mode_in_training "drop"
# expect: eval_mode_in_training "bn"
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 32)
        self.bn = nn.BatchNorm1d(32)
        self.drop = nn.Dropout(0.3)
        self.fc2 = nn.Linear(32, 2)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.bn(self.fc1(x)))))


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    for step in range(3):
        x, y = torch.randn(16, 10), torch.randint(0, 2, (16,))
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        val = model(torch.randn(16, 10)).sum().item()
