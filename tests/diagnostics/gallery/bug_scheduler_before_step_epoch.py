# BUG: the epoch's scheduler.step() at the top of the epoch loop, before any
# optimizer.step(): the first learning rate of the schedule (0.1) is never used.
# expect: scheduler_before_step ""
import warnings

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

warnings.filterwarnings("ignore", category=UserWarning)   # PyTorch's own warning, hidden
torch.manual_seed(0)
X, Y = torch.randn(128, 10), torch.randint(0, 3, (128,))
loader = DataLoader(TensorDataset(X, Y), batch_size=32, shuffle=True)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.3)
crit = nn.CrossEntropyLoss()
for epoch in range(3):
    sched.step()
    for xb, yb in loader:
        opt.zero_grad()
        loss = crit(model(xb), yb)
        loss.backward()
        opt.step()
    print(f"epoch {epoch} lr {sched.get_last_lr()[0]:.4f} loss {loss.item():.4f}")
