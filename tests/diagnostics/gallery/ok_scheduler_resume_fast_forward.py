# CORRECT: a run resumed at epoch 3 brings its schedule up to date by stepping the
# scheduler three times before training (PyTorch warns; the order is intended), then
# steps it after each epoch.
# expect: none
import warnings

import torch
from torch import nn

warnings.filterwarnings("ignore", category=UserWarning)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
start_epoch = 3
for _ in range(start_epoch):
    sched.step()
for epoch in range(start_epoch, start_epoch + 2):
    for _ in range(4):
        x, y = torch.randn(16, 10), torch.randint(0, 3, (16,))
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    sched.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
