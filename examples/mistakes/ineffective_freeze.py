# MISTAKE: `model.backbone.requires_grad = False` sets a plain attribute on the module;
# its parameters still require grad, so the "frozen" backbone is trained.
# FIX: model.backbone.requires_grad_(False) (the method), before building the optimizer.
# RUN: tensorscope run --headless examples/mistakes/ineffective_freeze.py
# expect: ineffective_freeze "backbone"
import torch
from torch import nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        return self.head(self.backbone(x))


model = Net()
model.backbone.requires_grad = False            # mistake: requires_grad_(False)
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05)
loss_fn = nn.CrossEntropyLoss()
for step in range(6):
    x, y = torch.randn(16, 16), torch.randint(0, 4, (16,))
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
