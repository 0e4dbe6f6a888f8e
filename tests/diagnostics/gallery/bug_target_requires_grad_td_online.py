# BUG: a TD(0) value update whose target is bootstrapped from the value network
# itself without .detach(): the loss also pulls V(s') towards V(s) (a residual
# gradient), so the critic learns a different, slower fixed point.
# expect: target_requires_grad ""
import torch
from torch import nn

torch.manual_seed(0)
critic = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.SGD(critic.parameters(), lr=1e-2)
loss_fn = nn.SmoothL1Loss()
for step in range(6):
    s, s2 = torch.randn(32, 4), torch.randn(32, 4)
    r = torch.randn(32, 1)
    td_target = r + 0.9 * critic(s2)
    loss = loss_fn(critic(s), td_target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
