# CORRECT: R-Drop: cross-entropy plus a symmetric KL between two dropout passes of one
# classifier; both passes are meant to get gradients (no detach on purpose).
# expect: none
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.3), nn.Linear(64, 5))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
alpha = 4.0
for step in range(6):
    x, y = torch.randn(32, 16), torch.randint(0, 5, (32,))
    p, q = model(x), model(x)
    ce = 0.5 * (F.cross_entropy(p, y) + F.cross_entropy(q, y))
    kl = 0.5 * (F.kl_div(F.log_softmax(p, -1), F.softmax(q, -1), reduction="batchmean")
                + F.kl_div(F.log_softmax(q, -1), F.softmax(p, -1), reduction="batchmean"))
    loss = ce + alpha * kl
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
