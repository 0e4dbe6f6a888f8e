# Probability targets given to a cross-entropy, all correct: one-hot float
# targets, mixup (a convex mix of two one-hot targets), and a teacher's softened
# probabilities (distillation through F.cross_entropy).
# Correct code.
# expect: none
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 6))
teacher = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 6)).eval()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(24):
    x, y = torch.randn(32, 20), torch.randint(0, 6, (32,))
    one_hot = F.one_hot(y, 6).float()
    if step % 3 == 0:
        target = one_hot
    elif step % 3 == 1:
        lam = float(torch.distributions.Beta(0.4, 0.4).sample())
        perm = torch.randperm(32)
        x = lam * x + (1 - lam) * x[perm]
        target = lam * one_hot + (1 - lam) * one_hot[perm]
    else:
        with torch.no_grad():
            target = F.softmax(teacher(x) / 2.0, dim=1)
    loss = F.cross_entropy(model(x), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(round(loss.item(), 4))
