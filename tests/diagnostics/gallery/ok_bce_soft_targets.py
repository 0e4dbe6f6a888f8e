# CORRECT: BCEWithLogitsLoss on label-smoothed targets in [0.05, 0.95], mixup targets,
# and multi-label targets; masks divided by 255.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
seg = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))
clf = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 5))
opt = torch.optim.Adam(list(seg.parameters()) + list(clf.parameters()), lr=1e-3)
crit = nn.BCEWithLogitsLoss()
for step in range(5):
    x = torch.randn(4, 3, 16, 16)
    mask = (torch.rand(4, 1, 16, 16) > 0.5).float() * 255
    xs, ys = torch.randn(16, 10), (torch.rand(16, 5) > 0.6).float()
    lam = 0.7
    perm = torch.randperm(16)
    mixed_x, mixed_y = lam * xs + (1 - lam) * xs[perm], lam * ys + (1 - lam) * ys[perm]
    opt.zero_grad()
    loss = crit(seg(x), mask / 255) + crit(clf(mixed_x), mixed_y * 0.9 + 0.05)
    loss.backward()
    opt.step()
    print(step, round(loss.item(), 4))
