# MISTAKE: gradient clipping called right after zero_grad(), before loss.backward():
# there is no gradient to clip yet, so the steps are never clipped.
# expect: ineffective_clipping ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.LSTM(8, 16, batch_first=True)
head = nn.Linear(16, 1)
params = [*model.parameters(), *head.parameters()]
opt = torch.optim.Adam(params, lr=1e-3)
for step in range(8):
    x, y = torch.randn(4, 10, 8), torch.randn(4, 1)
    opt.zero_grad()
    nn.utils.clip_grad_norm_(params, max_norm=1.0)       # mistake: nothing to clip yet
    out, _ = model(x)
    loss = nn.functional.mse_loss(head(out[:, -1]), y)
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
