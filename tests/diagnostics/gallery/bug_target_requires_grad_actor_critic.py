# BUG: an actor-critic whose TD target r + gamma * V(s') is not detached in the critic loss:
# the critic regresses V(s) and V(s') towards each other (a residual gradient).
# expect: target_requires_grad ""
import torch
import torch.nn.functional as F
from torch import nn
torch.manual_seed(0)
actor = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2))
critic = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=1e-3)
for step in range(6):
    s, s2, r = torch.randn(16, 4), torch.randn(16, 4), torch.randn(16, 1)
    dist = torch.distributions.Categorical(logits=actor(s)); a = dist.sample()
    v, v2 = critic(s), critic(s2)
    td = r + 0.99 * v2
    adv = (td - v).detach()
    loss = -(dist.log_prob(a) * adv.squeeze(1)).mean() + F.mse_loss(v, td)
    opt.zero_grad(); loss.backward(); opt.step()
