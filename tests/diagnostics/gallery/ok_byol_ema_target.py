# CORRECT: BYOL: the online branch predicts the EMA target branch, evaluated under no_grad.
# expect: none
import copy
import torch
import torch.nn.functional as F
from torch import nn
torch.manual_seed(0)
online = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 16))
predictor = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))
target = copy.deepcopy(online)
opt = torch.optim.Adam([*online.parameters(), *predictor.parameters()], lr=1e-3)
for step in range(6):
    x = torch.randn(32, 12)
    v1, v2 = x + 0.1 * torch.randn_like(x), x * 0.9
    p1 = F.normalize(predictor(online(v1)), dim=1)
    with torch.no_grad():
        z2 = F.normalize(target(v2), dim=1)
    loss = F.mse_loss(p1, z2) * 2
    opt.zero_grad(); loss.backward(); opt.step()
    with torch.no_grad():
        for pt, po in zip(target.parameters(), online.parameters()):
            pt.mul_(0.99).add_(po, alpha=0.01)
