# CORRECT: a confidence penalty: cross-entropy plus the KL from a uniform prior over the
# classes, one [C] distribution broadcast over the batch on purpose.
# expect: none
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 6))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
uniform = torch.full((6,), 1 / 6)
for step in range(6):
    x, y = torch.randn(32, 12), torch.randint(0, 6, (32,))
    logits = model(x)
    penalty = F.kl_div(F.log_softmax(logits, dim=1), uniform, reduction="batchmean")
    loss = F.cross_entropy(logits, y) + 0.1 * penalty
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
