# BUG: a DQN update that evaluates Q(s) and Q(s') in one batched forward of
# torch.cat([s, s2]) (no target network) and builds the TD target from the second half
# without .detach(): backward() also pulls max Q(s') towards Q(s) (a residual gradient).
# FIX: target = r + gamma * (1 - done) * q_next.max(1).values.detach() (or torch.no_grad()).
# expect: target_requires_grad ""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
q_net = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
optimizer = torch.optim.Adam(q_net.parameters(), lr=1e-3)
B, gamma = 32, 0.99
buffer = [(torch.randn(4), torch.randint(0, 2, ()), torch.randn(()), torch.randn(4),
           torch.rand(()) < 0.05) for _ in range(256)]
for step in range(8):
    batch = [buffer[i] for i in torch.randint(0, len(buffer), (B,))]
    s, a, r, s2, done = (torch.stack(x) for x in zip(*batch))
    q_all = q_net(torch.cat([s, s2]))
    q_s, q_next = q_all[:B], q_all[B:]
    q_sa = q_s.gather(1, a[:, None]).squeeze(1)
    target = r + gamma * (1 - done.float()) * q_next.max(1).values
    loss = F.smooth_l1_loss(q_sa, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(step, round(loss.item(), 4))
