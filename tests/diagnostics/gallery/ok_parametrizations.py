# weight_norm / spectral_norm parametrizations, orthogonal param; OneCycleLR; gradient clipping by value
# expect: none
import torch
from torch import nn
from torch.nn.utils import parametrizations as P
torch.manual_seed(0)
model = nn.Sequential(P.weight_norm(nn.Linear(6, 12)), nn.SiLU(), P.spectral_norm(nn.Linear(12, 12)), nn.SiLU(), P.orthogonal(nn.Linear(12, 12)), nn.Linear(12, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2); sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=6)
for step in range(6):
    x = torch.randn(16, 6); y = x[:, :1] * 2
    loss = nn.functional.huber_loss(model(x), y); opt.zero_grad(); loss.backward()
    nn.utils.clip_grad_value_(model.parameters(), 0.5); opt.step(); sched.step()
    print(f"step {step} loss {loss.item():.6f}")
