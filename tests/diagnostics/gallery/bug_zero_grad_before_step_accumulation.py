# MISTAKE: gradient accumulation over 4 micro-batches, but zero_grad() is called
# after every backward: the step sees only zeros.
# expect: zero_grad_before_step ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for i in range(16):
    x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
    (nn.functional.cross_entropy(model(x), y) / 4).backward()
    opt.zero_grad(set_to_none=False)
    if (i + 1) % 4 == 0:
        opt.step()
