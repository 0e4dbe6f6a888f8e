# CORRECT: torch.utils.checkpoint with use_reentrant=True (the recomputation during
# backward is part of the step; no extra steps, calls or findings), then an evaluation.
# expect: none
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 32)
        self.act = nn.GELU()

    def forward(self, x):
        return x + self.act(self.fc(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(3))
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=True) if self.training else b(x)
        return self.head(x)


torch.manual_seed(0)
model = Net()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(12):
    x = torch.randn(16, 32, requires_grad=True)
    y = torch.randint(0, 4, (16,))
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
model.eval()
with torch.no_grad():
    for _ in range(3):
        model(torch.randn(64, 32))
