# MISTAKE: a layer is added to the model after the optimizer was created, so
# its parameters get gradients but are never updated.
# FIX: create the optimizer after the model is complete (or add_param_group).
# RUN: tensorscope run --headless examples/mistakes/param_not_in_optimizer.py
# expect: param_not_in_optimizer "head"
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(10, 32)
        self.head = None

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


torch.manual_seed(0)
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
model.head = nn.Linear(32, 3)
for step in range(5):
    x, y = torch.randn(16, 10), torch.randint(0, 3, (16,))
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
