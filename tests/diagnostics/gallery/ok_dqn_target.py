# CORRECT: a DQN-style update: the target network is evaluated under no_grad,
# and the online network's next-state values are detached.
# expect: none
import copy

import torch
from torch import nn

torch.manual_seed(0)
q = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 3))
target = copy.deepcopy(q)
target.requires_grad_(False)
opt = torch.optim.Adam(q.parameters(), lr=1e-3)
for step in range(6):
    s, s2 = torch.randn(16, 6), torch.randn(16, 6)
    a, r = torch.randint(0, 3, (16,)), torch.randn(16)
    with torch.no_grad():
        best = q(s2).argmax(1)
        y = r + 0.99 * target(s2).gather(1, best[:, None]).squeeze(1)
    pred = q(s).gather(1, a[:, None]).squeeze(1)
    loss = nn.functional.smooth_l1_loss(pred, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 3 == 2:
        target.load_state_dict(q.state_dict())
