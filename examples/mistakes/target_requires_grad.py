# BUG: a DQN whose TD target is computed from the target network with gradients on
# (no torch.no_grad(), no .detach()): backward() runs through the target into the
# target network, whose .grad fills up for nothing.
# expect: target_requires_grad ""
import copy

import torch
from torch import nn

torch.manual_seed(0)
q = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 3))
target_net = copy.deepcopy(q)
opt = torch.optim.Adam(q.parameters(), lr=1e-3)
gamma = 0.99
for step in range(6):
    s, s2 = torch.randn(16, 6), torch.randn(16, 6)
    a, r = torch.randint(0, 3, (16,)), torch.randn(16)
    done = (torch.rand(16) < 0.1).float()
    y = r + gamma * (1 - done) * target_net(s2).max(1).values
    pred = q(s).gather(1, a[:, None]).squeeze(1)
    loss = nn.functional.mse_loss(pred, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 3 == 2:
        target_net.load_state_dict(q.state_dict())
    print(f"step {step} loss {loss.item():.4f}")
