# CORRECT: mixed precision on CPU with bfloat16 autocast.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(4):
    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
